package powercut

import (
	"sync"
	"time"
)

// A frozen disk: every operation that changes the filesystem (data writes,
// truncations, namespace changes) or makes it durable (fsync, fdatasync,
// directory fsync) blocks until Thaw; reads, lookups and attributes answer
// as usual. It is a disk that stops moving without failing, as a saturated
// or hung device does: a process writing to it waits instead of seeing an
// error. A blocked operation ignores FUSE interrupts (the Go runtime's
// preemption signals would otherwise turn it into EINTR, which is a failing
// disk, not a stalled one) and is released by Thaw, Cut or Close.

// gate is the freeze and pacing state (SlowWrites, slow.go); the zero
// value is thawed and not slowed.
type gate struct {
	mu      sync.Mutex
	thawed  chan struct{} // closed by Thaw; nil while not frozen
	blocked int           // operations waiting now

	slowDir string    // SlowWrites' directory, a backing path
	rate    int64     // SlowWrites' bytes per second; 0: not slowed
	due     time.Time // when the writes paced so far are done
}

// Freeze makes every later mutating or syncing operation block until Thaw.
// Operations already past the gate complete. Freezing a frozen filesystem
// does nothing.
func (p *FS) Freeze() {
	p.gate.mu.Lock()
	defer p.gate.mu.Unlock()
	if p.gate.thawed == nil {
		p.gate.thawed = make(chan struct{})
	}
}

// Thaw releases every blocked operation and lets new ones through.
func (p *FS) Thaw() {
	p.gate.mu.Lock()
	defer p.gate.mu.Unlock()
	if p.gate.thawed != nil {
		close(p.gate.thawed)
		p.gate.thawed = nil
	}
}

// Blocked is how many operations wait on the freeze right now: a test
// knows from it that the frozen disk is really holding a writer back.
func (p *FS) Blocked() int {
	p.gate.mu.Lock()
	defer p.gate.mu.Unlock()
	return p.gate.blocked
}

// pass returns at once while thawed and blocks while frozen.
func (p *FS) pass() {
	p.gate.mu.Lock()
	ch := p.gate.thawed
	if ch == nil {
		p.gate.mu.Unlock()
		return
	}
	p.gate.blocked++
	p.gate.mu.Unlock()
	<-ch
	p.gate.mu.Lock()
	p.gate.blocked--
	p.gate.mu.Unlock()
}
