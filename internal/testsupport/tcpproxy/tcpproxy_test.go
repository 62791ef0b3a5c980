package tcpproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echo serves a loopback echo of lines until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func newProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// roundTrip sends a line on c and reads it back, with a deadline so a cut
// link fails the read instead of hanging it.
func roundTrip(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echoed " + line)
	}
	return nil
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// forwarding dials p and proves the connection forwards both ways.
func forwarding(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c := dial(t, p)
	if err := roundTrip(c); err != nil {
		t.Fatalf("an open link must forward both ways: %v", err)
	}
	return c
}

func TestAProxyForwardsToItsTarget(t *testing.T) {
	forwarding(t, newProxy(t))
}

func TestACutLinkClosesLiveConnectionsRefusesNewOnesAndHeals(t *testing.T) {
	p := newProxy(t)
	live := forwarding(t, p)
	p.SetBlocked(true)
	if err := roundTrip(live); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a cut must close a live connection, not leave it silent; got %v", err)
	}
	if err := roundTrip(dial(t, p)); err == nil {
		t.Fatal("a cut link must refuse a new connection")
	}
	p.SetBlocked(false)
	forwarding(t, p)
}

func TestAClosedProxyRefusesEverything(t *testing.T) {
	p := newProxy(t)
	live := forwarding(t, p)
	p.Close()
	if err := roundTrip(live); err == nil {
		t.Fatal("Close must close a live connection")
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		defer c.Close()
		if roundTrip(c) == nil {
			t.Fatal("a closed proxy must not forward a new connection")
		}
	}
}
