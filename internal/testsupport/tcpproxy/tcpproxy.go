// Package tcpproxy is the one loopback TCP proxy of the fault tests: a
// Proxy forwards every connection to one target and can cut the link as a
// network partition would, and Serve is its accept loop for proxies that
// fault the traffic in other ways (the process tests' reply-losing proxy).
// The nemesis (hack/chaos) and the process tests
// (internal/replica/processtest) put one Proxy on each direction of each
// Raft route, so cutting both of a pair partitions two hosts while the rest
// of the volume still talks (docs/qualification.md, "Nemesis (make chaos)";
// docs/replica-engine.md, "Tests").
//
// A cut is a refusal, not a silence: live connections are closed and new
// ones are accepted and closed at once, so each side sees its peer
// unreachable without waiting on a timeout.
//
// It is test support: production code must never import it.
package tcpproxy

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP from a loopback listener to one target and can cut
// the link.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	blocked bool
	conns   map[net.Conn]struct{} // both sides of every live forwarded connection
}

// New listens on a free loopback port and forwards what it accepts to
// target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for a proxy to %s: %w", target, err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go Serve(ln, target, p.isBlocked, p.forward)
	return p, nil
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetBlocked cuts the link (closing every live connection, refusing new
// ones) or heals it.
func (p *Proxy) SetBlocked(b bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = b
	if b {
		for c := range p.conns {
			c.Close()
		}
		p.conns = map[net.Conn]struct{}{}
	}
}

// Close cuts the link for good and stops listening. The link is cut first,
// so a connection accepted while the listener closes is refused too.
func (p *Proxy) Close() {
	p.SetBlocked(true)
	p.ln.Close()
}

// Serve accepts on ln until it is closed. While refuse reports true a new
// connection is closed at once (the target is unreachable from the
// client); otherwise it is dialled through to target and handed, with its
// upstream connection, to handle, which must start its own goroutines. A
// failed dial closes the client's connection, as an unreachable target
// would.
func Serve(ln net.Listener, target string, refuse func() bool, handle func(client, upstream net.Conn)) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		if refuse() {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		handle(in, out)
	}
}

func (p *Proxy) isBlocked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blocked
}

// forward copies both ways, unless the link was cut since the connection
// was accepted.
func (p *Proxy) forward(in, out net.Conn) {
	if !p.track(in, out) {
		return
	}
	go p.pipe(in, out)
	go p.pipe(out, in)
}

// track records cs as live, or closes them when the link is cut.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst until either side ends, then closes both: a
// connection half cut is cut.
func (p *Proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
