package fsm

// Files written in order: their checksum kept by the apply, their pages
// out of the cache once written back.
//
// The apply writes every byte of a volume into a backing file through the
// page cache, where the bytes would stay: each replica host would cache its
// whole replica, though only the coordinator reads it and the mount's own
// page cache serves its reader first. Growing the page cache is also the
// dearest part of a write on machines whose free memory goes back to their
// hypervisor: a page not used since costs 2.5 to 5 ms of processor time per
// MiB to fill, against 0.2 for one freed a moment ago (docs/performance.md,
// "Pages of files written in order dropped behind the writes").
//
// A linked checkpoint checksums every file changed since the last one
// (linked.go), so dropping the pages of any written file would make the
// next checkpoint read it back from the disk. For a file written in order
// from its start, which is how files are streamed, logged or copied, the
// apply keeps the CRC-32C of its bytes as it writes them; a checkpoint
// capturing the file at that size takes the checksum without reading, and
// the file's pages can leave the cache. Writes that commit a little ahead
// of the bytes before them still count as in order (seqSum.pending). Any
// other change of the file (a rewrite, a truncate, an allocation) forgets
// its checksum, and the checkpoint reads the file as before.

import (
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

const (
	// maxSeqSums bounds the files whose running checksum is kept (a freed
	// file's entry goes with it). Past it the table starts over, which
	// costs the next checkpoint a read of the files written in order.
	maxSeqSums = 4096
	// dontCacheMinWrite: smaller writes go through the page cache.
	dontCacheMinWrite = 256 << 10
)

// seqSum is the CRC-32C of a file's first size bytes, all written in order,
// and the writes that reached the file ahead of them: a batch holds
// concurrent writes in the order they reached the mount, and a mount may
// keep several calls in flight (fuse.BatchOptions.InFlight), so a stream's
// entries can commit a few writes out of order.
// Such a write waits in pending, with its own checksum, until the bytes
// before it are written and it is folded in (crc32Combine).
type seqSum struct {
	size    uint64
	crc     uint32
	pending []seqRange
}

// seqRange is a write kept ahead of a file's in-order bytes.
type seqRange struct {
	off, n uint64
	crc    uint32
}

// maxSeqPending bounds the writes a file keeps ahead of its in-order
// bytes; one more and the file is not one written in order.
const maxSeqPending = 16

// end is the size of the file all the recorded writes make.
func (e *seqSum) end() uint64 {
	if k := len(e.pending); k > 0 {
		return e.pending[k-1].off + e.pending[k-1].n
	}
	return e.size
}

// seqSums is guarded by the state machine's lock: the apply changes it
// under the write lock, a capture reads it under the read lock.
type seqSums struct {
	m map[uint64]seqSum
}

// continues reports whether a write of n bytes at off to ino, which holds
// before bytes, keeps it a file written in order: every byte of the file
// comes from a recorded write, and the write lands on none of them.
func (s *seqSums) continues(ino, before, off, n uint64) bool {
	e, ok := s.m[ino]
	if !ok {
		return before == 0
	}
	if before != e.end() || off < e.size {
		return false
	}
	for _, r := range e.pending {
		if off < r.off+r.n && r.off < off+n {
			return false
		}
	}
	return true
}

// wrote records a write of data at off to ino; inOrder is what continues
// said of it before it was made.
func (s *seqSums) wrote(ino uint64, inOrder bool, off uint64, data []byte) {
	n := uint64(len(data))
	if !inOrder {
		delete(s.m, ino)
		return
	}
	e, ok := s.m[ino]
	if !ok && (s.m == nil || len(s.m) >= maxSeqSums) {
		s.m = map[uint64]seqSum{}
	}
	if off != e.size {
		if len(e.pending) == maxSeqPending {
			delete(s.m, ino)
			return
		}
		i, _ := slices.BinarySearchFunc(e.pending, off, func(r seqRange, off uint64) int { return cmp.Compare(r.off, off) })
		e.pending = slices.Insert(slices.Clip(e.pending), i, seqRange{off: off, n: n, crc: crc32.Checksum(data, castagnoli)})
		s.m[ino] = e
		return
	}
	e.crc = crc32.Update(e.crc, castagnoli, data)
	e.size += n
	k := 0
	for ; k < len(e.pending) && e.pending[k].off == e.size; k++ {
		e.crc = crc32Combine(e.crc, e.pending[k].crc, e.pending[k].n)
		e.size += e.pending[k].n
	}
	if k > 0 {
		e.pending = slices.Clone(e.pending[k:])
	}
	s.m[ino] = e
}

// forget drops ino's checksum after any change other than an in-order write.
func (s *seqSums) forget(ino uint64) { delete(s.m, ino) }

// reset forgets every checksum: the tree was replaced.
func (s *seqSums) reset() { s.m = nil }

// seqPrefix is the CRC-32C of a file's first n bytes.
type seqPrefix struct {
	n   uint64
	crc uint32
}

// prefix returns the checksum kept of ino's bytes written in order, for a
// capture of the file at size bytes: all of them when no write waits ahead,
// else those before the first that does; none (n 0) for a file not written
// in order.
func (s *seqSums) prefix(ino, size uint64) seqPrefix {
	e, ok := s.m[ino]
	if !ok || e.size > size {
		return seqPrefix{}
	}
	return seqPrefix{n: e.size, crc: e.crc}
}

// dontCacheRefused is set once the kernel or the filesystem of the backing
// tree refuses RWF_DONTCACHE (before Linux 6.14, or a filesystem without
// it): writeUncached then writes through the cache, and the pages stay
// until the kernel reclaims them.
var dontCacheRefused atomic.Bool

// writeUncached writes data at off to fh, a file written in order, so that
// its pages leave the page cache as soon as they are written back: the
// whole pages with RWF_DONTCACHE, which starts their writeback at once and
// frees each folio when it completes; a partial page at either end through
// the cache, since the next in-order write continues it and would otherwise
// read it back from the disk. A write smaller than dontCacheMinWrite goes
// through the cache whole.
func writeUncached(fh *os.File, data []byte, off uint64) error {
	end := off + uint64(len(data))
	from, to := wholePages(off, end)
	if to-from < dontCacheMinWrite || dontCacheRefused.Load() {
		_, err := fh.WriteAt(data, int64(off))
		return err
	}
	if from > off {
		if _, err := fh.WriteAt(data[:from-off], int64(off)); err != nil {
			return err
		}
	}
	mid := data[from-off : to-off]
	n, err := unix.Pwritev2(int(fh.Fd()), [][]byte{mid}, int64(from), unix.RWF_DONTCACHE)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		dontCacheRefused.Store(true)
		_, err := fh.WriteAt(data[from-off:], int64(from))
		return err
	}
	if err != nil {
		return fmt.Errorf("write %d bytes at %d: %w", len(mid), from, err)
	}
	// The partial page at the end, and the rest of a short write (the
	// kernel may stop early), go through the cache.
	if rest := data[from-off+uint64(n):]; len(rest) > 0 {
		if _, err := fh.WriteAt(rest, int64(from)+int64(n)); err != nil {
			return err
		}
	}
	return nil
}

// wholePages is the part of [off, end) made of whole pages (empty, from ==
// to, when there is none): the partial page at either end is written on by
// the neighbouring in-order write, so it stays cached.
func wholePages(off, end uint64) (from, to uint64) {
	page := uint64(os.Getpagesize())
	from = min((off+page-1)&^(page-1), end)
	to = max(end&^(page-1), from)
	return from, to
}
