package journal

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// DeleteRange implements raft.LogStore for the prefix and suffix ranges raft
// deletes (compaction after a checkpoint; conflicting entries).
func (l *Log) DeleteRange(lo, hi uint64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	last := l.lastLocked()
	if last == 0 || lo > last {
		return nil
	}
	if hi >= last {
		if lo <= l.floor {
			l.floor = 0 // everything goes; the next append may start anywhere
		}
		return l.truncateSuffix(lo)
	}
	return l.truncatePrefix(hi)
}

// truncateSuffix removes entries >= min, newest segment first, so a crash
// part way leaves a prefix of the old log.
func (l *Log) truncateSuffix(min uint64) error {
	for len(l.segs) > 1 {
		s := l.segs[len(l.segs)-1]
		if len(s.offsets) > 0 && s.first < min {
			break
		}
		s.f.Close()
		if err := os.Remove(l.segPath(s.seq)); err != nil {
			return fmt.Errorf("delete journal segment: %w", err)
		}
		l.segs = l.segs[:len(l.segs)-1]
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	s := l.segs[len(l.segs)-1]
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
	return nil
}

// truncatePrefix deletes whole segments holding only entries <= hi, oldest
// first; the tail segment always stays.
func (l *Log) truncatePrefix(hi uint64) error {
	l.floor = max(l.floor, hi+1)
	removed := false
	for len(l.segs) > 1 {
		s := l.segs[0]
		if len(s.offsets) > 0 && s.last() > hi {
			break
		}
		s.f.Close()
		if err := os.Remove(l.segPath(s.seq)); err != nil {
			return fmt.Errorf("delete journal segment: %w", err)
		}
		l.segs = l.segs[1:]
		removed = true
	}
	if removed {
		return syncDir(l.dir)
	}
	return nil
}
