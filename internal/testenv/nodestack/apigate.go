package nodestack

// The API gate: a TCP forwarder between the stack's replica hosts and the
// API server, so a test can take the API away from the hosts (an outage as
// a node sees one: connections refused and cut) while the test, the
// controller and the API server itself go on.

import (
	"io"
	"net"
	"net/url"
	"sync"
)

type apiGate struct {
	target string // the API server's host:port
	addr   string // where the hosts dial it
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

// gatedServer is the API server's URL as the hosts dial it: through the
// gate when the test asked for one (APIGated), directly otherwise.
func (s *Stack) gatedServer() string {
	s.T.Helper()
	if !s.APIGated {
		return s.Env.Config.Host
	}
	if s.gate == nil {
		u, err := url.Parse(s.Env.Config.Host)
		if err != nil {
			s.T.Fatal(err)
		}
		s.gate = &apiGate{target: u.Host, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
		s.OpenAPI()
		s.T.Cleanup(s.CutAPI)
	}
	return "https://" + s.gate.addr
}

// CutAPI takes the API away from the hosts: the gate stops listening and
// every connection through it is closed.
func (s *Stack) CutAPI() {
	g := s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		_ = g.ln.Close()
		g.ln = nil
	}
	for c := range g.conns {
		_ = c.Close()
	}
	clear(g.conns)
}

// OpenAPI gives the hosts the API again, at the address they dial.
func (s *Stack) OpenAPI() {
	s.T.Helper()
	g := s.gate
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		s.T.Fatalf("the API gate listens at %s again: %v", g.addr, err)
	}
	g.mu.Lock()
	g.ln, g.addr = ln, ln.Addr().String()
	g.mu.Unlock()
	go g.serve(ln)
}

func (g *apiGate) serve(ln net.Listener) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return // cut
		}
		out, err := net.Dial("tcp", g.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		g.mu.Lock()
		if g.ln != ln { // cut between Accept and here
			g.mu.Unlock()
			_, _ = in.Close(), out.Close()
			continue
		}
		g.conns[in], g.conns[out] = struct{}{}, struct{}{}
		g.mu.Unlock()
		go g.pipe(in, out)
		go g.pipe(out, in)
	}
}

// pipe copies one direction and closes both ends when either does.
func (g *apiGate) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_, _ = dst.Close(), src.Close()
	g.mu.Lock()
	delete(g.conns, dst)
	delete(g.conns, src)
	g.mu.Unlock()
}
