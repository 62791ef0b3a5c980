package member

import "sync"

// writeGate counts writes in flight and, once closed for the drain, admits no
// new one and signals when the last one has left.
type writeGate struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{}
}

func newWriteGate() *writeGate { return &writeGate{idle: make(chan struct{})} }

// enter admits a write unless the gate is closed.
func (g *writeGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

func (g *writeGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.closed && g.n == 0 {
		close(g.idle)
	}
}

// close admits no more writes; the returned channel closes when none is in flight.
func (g *writeGate) close() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		if g.n == 0 {
			close(g.idle)
		}
	}
	return g.idle
}

// inFlight is the number of writes admitted and not yet answered.
func (g *writeGate) inFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}
