package standalone

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
)

// FreePortRange finds n consecutive TCP ports free on 127.0.0.1 now, for a
// standalone volume's BasePort or StatusBasePort. The range is chosen
// below the kernel's ephemeral range: a port in it can be taken between
// this check and the host's bind by any outgoing connection of this
// machine (a replica host then fails with "address already in use"), while
// a port below it only by a program that binds that port itself.
func FreePortRange(n int) (int, error) {
	if n < 1 || n > 64 {
		return 0, fmt.Errorf("a range of %d ports: want 1 to 64", n)
	}
	low := ephemeralLow()
	const floor = 10000
	if low-n <= floor {
		return 0, fmt.Errorf("no room for %d ports between %d and the ephemeral range at %d", n, floor, low)
	}
	for range 100 {
		base := floor + rand.IntN(low-n-floor)
		if portsFree(base, n) {
			return base, nil
		}
	}
	return 0, errors.New("no free port range on loopback after 100 tries")
}

// portsFree reports whether ports base to base+n-1 can be listened on.
func portsFree(base, n int) bool {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := range n {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
		if err != nil {
			return false
		}
		lns = append(lns, ln)
	}
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default 32768 when it cannot be read).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var hi int
		if _, err := fmt.Sscan(string(b), &low, &hi); err != nil {
			low = 32768
		}
	}
	return low
}
