package powercut

import (
	"path/filepath"
	"strings"
	"time"
)

// SlowWrites paces the data writes to files below dir (relative to the
// mountpoint; "" for all) to rate bytes per second, and rate = 0 ends it:
// part of a disk that keeps moving, slowly, as a busy or throttled device
// does. Writes are paced together, not each delayed: a writer's requests
// may be as small as a page, and sleeping per request would measure the
// timer, not the rate. Namespace changes, syncs and allocations are not
// slowed.
func (p *FS) SlowWrites(dir string, rate int64) {
	p.gate.mu.Lock()
	defer p.gate.mu.Unlock()
	p.gate.slowDir, p.gate.rate, p.gate.due = filepath.Join(p.backing, dir), rate, time.Time{}
}

// slowWrite paces a write of n bytes to path (a backing path) when path is
// below SlowWrites' directory: it returns once the writes paced before it
// and this one would have taken at the rate, sleeping only when that is
// at least a millisecond ahead.
func (p *FS) slowWrite(path string, n int) {
	p.gate.mu.Lock()
	dir := p.gate.slowDir
	if p.gate.rate == 0 || (path != dir && !strings.HasPrefix(path, dir+string(filepath.Separator))) {
		p.gate.mu.Unlock()
		return
	}
	now := time.Now()
	p.gate.due = maxTime(p.gate.due, now).Add(time.Duration(int64(n) * int64(time.Second) / p.gate.rate))
	wait := p.gate.due.Sub(now)
	p.gate.mu.Unlock()
	if wait >= time.Millisecond {
		time.Sleep(wait)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
