package journal

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// DeleteRange implements raft.LogStore for the ranges raft deletes: a
// prefix (compaction after a checkpoint), a suffix (conflicting entries), or
// everything (after installing a checkpoint, see IsMonotonic).
func (l *Log) DeleteRange(lo, hi uint64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recent.clear()
	last := l.lastLocked()
	if last == 0 || lo > last {
		return nil
	}
	if hi >= last {
		if lo <= l.firstLocked() {
			// Everything visible goes, and with it the entries hidden below
			// the floor: they would reappear after a restart and sit in front
			// of the next append, which may start anywhere.
			l.floor = 0
			return l.truncateSuffix(0)
		}
		return l.truncateSuffix(lo)
	}
	return l.truncatePrefix(hi)
}

// IsMonotonic implements raft.MonotonicLogStore. The journal refuses gaps
// between indexes, so after installing a checkpoint raft must remove every
// old entry (removeOldLogs) rather than compact a prefix and keep a tail the
// entries after the checkpoint could never follow.
func (l *Log) IsMonotonic() bool { return true }

// Reset removes every entry. The worker calls it at start when the newest
// checkpoint is past the journal's end: a crash between installing a
// checkpoint and raft removing the old entries left them behind, and the
// next append (after the checkpoint's index) could not follow them.
func (l *Log) Reset() error {
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if last == 0 {
		return nil
	}
	return l.DeleteRange(first, last)
}

// truncateSuffix removes entries >= min, newest segment first, so a crash
// part way leaves a prefix of the old log.
func (l *Log) truncateSuffix(min uint64) error {
	for len(l.segs) > 1 {
		s := l.segs[len(l.segs)-1]
		if len(s.offsets) > 0 && s.first < min {
			break
		}
		s.close()
		if err := os.Remove(l.segPath(s.name)); err != nil {
			return fmt.Errorf("delete journal segment: %w", err)
		}
		l.segs = l.segs[:len(l.segs)-1]
	}
	if err := durable.SyncDir(l.dir); err != nil {
		return err
	}
	s := l.segs[len(l.segs)-1]
	l.openDirect(s) // the tail may be a segment that was not the tail before
	if len(s.offsets) == 0 || s.last() < min {
		return nil
	}
	keep := 0
	if min > s.first {
		keep = int(min - s.first)
	}
	off := int64(0)
	if keep < len(s.offsets) {
		off = int64(s.offsets[keep])
	}
	if err := s.f.Truncate(off); err != nil {
		return fmt.Errorf("truncate journal: %w", err)
	}
	if err := unix.Fdatasync(int(s.f.Fd())); err != nil {
		return err
	}
	s.offsets = s.offsets[:keep]
	s.size = off
	s.blockEnd = -1
	return nil
}

// truncatePrefix retires whole segments holding only entries <= hi, oldest
// first (kept as spares, recycle.go); the tail segment always stays.
func (l *Log) truncatePrefix(hi uint64) error {
	l.floor = max(l.floor, hi+1)
	removed := false
	for len(l.segs) > 1 {
		s := l.segs[0]
		if len(s.offsets) > 0 && s.last() > hi {
			break
		}
		s.close()
		if err := l.retire(s); err != nil {
			return err
		}
		l.segs = l.segs[1:]
		removed = true
	}
	if removed {
		return durable.SyncDir(l.dir)
	}
	return nil
}
