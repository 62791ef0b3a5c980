package journal

// Byte accounting for the worker's journal bound (docs/replica-engine.md,
// "Disk and memory bounds"): raft retains entries by count, the worker by
// bytes, so it needs the journal's size and the size of its newest entries.

// Bytes returns the bytes the journal's segments hold on disk, including
// compacted entries that still share a segment with live ones.
func (l *Log) Bytes() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// NewestWithin returns how many of the newest entries fit in budget bytes
// of frames.
func (l *Log) NewestWithin(budget int64) uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var count uint64
	for i := len(l.segs) - 1; i >= 0; i-- {
		s := l.segs[i]
		end := s.size
		for k := len(s.offsets) - 1; k >= 0; k-- {
			if first := s.first + uint64(k); l.floor > 0 && first < l.floor {
				return count
			}
			budget -= end - int64(s.offsets[k])
			if budget < 0 {
				return count
			}
			end = int64(s.offsets[k])
			count++
		}
	}
	return count
}

// BytesBetween returns the bytes of the frames of the entries after index
// after, up to and including through, that the journal holds. A follower
// measures with it the entries it knows committed but has not applied yet
// (the worker's apply backlog bound).
func (l *Log) BytesBetween(after, through uint64) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for i := len(l.segs) - 1; i >= 0; i-- {
		s := l.segs[i]
		if len(s.offsets) == 0 || s.first > through {
			continue
		}
		if s.last() <= after {
			break
		}
		end := s.size
		for k := len(s.offsets) - 1; k >= 0; k-- {
			idx := s.first + uint64(k)
			if idx <= after || idx < l.floor {
				break
			}
			if idx <= through {
				n += end - int64(s.offsets[k])
			}
			end = int64(s.offsets[k])
		}
	}
	return n
}
