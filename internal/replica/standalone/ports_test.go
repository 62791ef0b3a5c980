package standalone

import (
	"fmt"
	"net"
	"testing"
)

// TestFreePortRangeIsBelowTheEphemeralRange: the ports handed to replica
// hosts are free and below the range the kernel gives outgoing
// connections, so no connection of this machine can take one before the
// host binds it (a benchmark beside GlusterFS failed so: "bind: address
// already in use" on 44540, inside 32768 to 60999).
func TestFreePortRangeIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 50 {
		base, err := FreePortRange(3)
		if err != nil {
			t.Fatal(err)
		}
		if base < 10000 || base+3 > low {
			t.Fatalf("FreePortRange(3) = %d: want 10000 <= base and base+3 <= %d (the ephemeral range's start)", base, low)
		}
		for i := range 3 {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				t.Fatalf("port %d of the range is not free: %v", base+i, err)
			}
			ln.Close()
		}
	}
	for _, n := range []int{0, -1, 65} {
		if _, err := FreePortRange(n); err == nil {
			t.Errorf("FreePortRange(%d) accepted", n)
		}
	}
}
