package processtest

import (
	"io"
	"net"
	"sync"
	"testing"

	"github.com/cellfleet/cellfleet/internal/testsupport/tcpproxy"
)

// replyProxy sits between a client and one worker and loses replies: once
// armed, the next bytes the worker sends are swallowed and both sides of
// that connection are cut, so the worker has applied and answered a call
// whose answer never arrives. While refusing, new connections are closed
// at once (the worker is unreachable from the client).
type replyProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	armed    bool
	refusing bool
	accepted int
	dropped  chan struct{} // closed when an armed drop happened
	conns    map[net.Conn]struct{}
}

func newReplyProxy(t testing.TB, target string) *replyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyProxy{ln: ln, target: target, dropped: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *replyProxy) addr() string { return p.ln.Addr().String() }

// dropNextReply arms the proxy; refuseAfter keeps the worker unreachable
// after the drop until release.
func (p *replyProxy) dropNextReply(refuseAfter bool) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
	p.refusing = false
	p.dropped = make(chan struct{})
	if refuseAfter {
		ch := p.dropped
		go func() { <-ch; p.setRefusing(true) }()
	}
	return p.dropped
}

func (p *replyProxy) setRefusing(b bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = b
}

// connections reports how many client connections reached the worker.
func (p *replyProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// serve accepts through tcpproxy.Serve: while refusing, the worker is
// unreachable; otherwise each connection is counted and forwarded.
func (p *replyProxy) serve() {
	tcpproxy.Serve(p.ln, p.target, p.isRefusing, func(in, out net.Conn) {
		p.mu.Lock()
		p.accepted++
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.forward(out, in)
		go p.replies(in, out)
	})
}

func (p *replyProxy) isRefusing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusing
}

// forward copies client → worker.
func (p *replyProxy) forward(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	p.cut(dst, src)
}

// replies copies worker → client, losing the first reply after arming.
func (p *replyProxy) replies(dst, src net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop, dropped := p.armed, p.dropped
			p.armed = false
			p.mu.Unlock()
			if drop {
				p.cut(dst, src)
				close(dropped)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	p.cut(dst, src)
}

func (p *replyProxy) cut(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *replyProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}
