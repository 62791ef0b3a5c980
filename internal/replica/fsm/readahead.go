package fsm

// Readahead of backing files for sequential readers. A query opens its own
// handle of the backing file (a cached one could outlive the file's
// replacement by a capture's copy-on-write), so the kernel's readahead,
// which follows one open file, starts over at every read: each 1 MiB read
// of a cold file waited for the disk, in 128 KiB steps. For a read that
// continues an earlier one of the same inode the coordinator asks the
// kernel to fetch the following window (posix_fadvise WILLNEED: asynchronous,
// on the file's pages, not the handle's), so the next reads find their
// pages cached or on the way. docs/performance.md ("Reads") has the figures.

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

const (
	// readAheadBytes is how far past a sequential read the backing file is
	// fetched: the mount's readahead window (internal/fuse), so that the
	// reads the kernel has in flight all hit the page cache.
	readAheadBytes = 8 << 20
	// maxReadStreams bounds the inodes whose read position is remembered
	// (inode numbers are never reused, so a freed file's entry is only
	// wasted until the map starts over).
	maxReadStreams = 1024
)

type readStream struct {
	next  uint64 // where the last read ended
	ahead uint64 // how far the file was asked to be fetched
}

type readAhead struct {
	mu      sync.Mutex
	streams map[uint64]*readStream
}

// after is called when a read of [off, end) of ino's backing file fh
// returned: a read within the window of the previous one is sequential
// (the kernel sends several at once, not necessarily in order), and the
// window past it not yet asked for is fetched.
func (r *readAhead) after(ino uint64, fh *os.File, off, end uint64) {
	r.mu.Lock()
	if r.streams == nil || len(r.streams) >= maxReadStreams {
		r.streams = map[uint64]*readStream{}
	}
	s := r.streams[ino]
	if s == nil {
		r.streams[ino] = &readStream{next: end}
		r.mu.Unlock()
		return
	}
	sequential := off+readAheadBytes >= s.next && off <= s.next+readAheadBytes
	s.next = max(s.next, end)
	from, to := max(end, s.ahead), end+readAheadBytes
	if !sequential || from >= to {
		r.mu.Unlock()
		return
	}
	s.ahead = to
	r.mu.Unlock()
	// Advice only: a failure costs speed, never correctness.
	_ = unix.Fadvise(int(fh.Fd()), int64(from), int64(to-from), unix.FADV_WILLNEED)
}
