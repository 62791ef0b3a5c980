package fuse

// Write-behind for single-writer volumes. A WRITE is answered once its data
// is queued for the engine; the commit on a quorum happens in the
// background, several engine entries at a time, so a sequential writer is
// no longer paced by one quorum round trip per request. What stays true:
//
//   - fsync and close (FLUSH) return only after every write to the file
//     before them is committed on a quorum, and report the first write that
//     failed since the last report (EIO for an uncertain outcome, ENOSPC,
//     ...). A later write to a file in error fails at once with that error.
//   - Reads, attribute requests, truncation and every other request about a
//     file first wait for its queued writes, so the mount never answers
//     from a state older than what it acknowledged (read-your-writes).
//   - Overlapping writes to one file never commit concurrently (two engine
//     entries in flight may be ordered either way), so the later one wins.
//   - Queued data is bounded (WritebackBytes per mount); a writer beyond
//     it waits for commits.
//
// Shared volumes keep synchronous writes: another node may read the file
// at any time, so a WRITE is answered only once committed.

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fs"
)

// defaultWritebackBytes bounds the data one mount holds uncommitted: the
// batcher's four entries in flight of 4 MiB each, and as much again queued
// behind them (docs/performance.md, ## FUSE mount).
const defaultWritebackBytes = 32 << 20

type span struct{ off, end uint64 }

func (s span) overlaps(o span) bool { return s.off < o.end && o.off < s.end }

// dirtyInode is one file's writes in flight and its unreported failure.
type dirtyInode struct {
	inflight []span
	err      error
}

type writeback struct {
	batch *batcher
	limit int

	mu     sync.Mutex
	cond   *sync.Cond
	queued int // bytes in flight, all files
	files  map[uint64]*dirtyInode
}

func newWriteback(b *batcher, limit int) *writeback {
	if limit <= 0 {
		limit = defaultWritebackBytes
	}
	w := &writeback{batch: b, limit: limit, files: map[uint64]*dirtyInode{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// write queues data at off in ino and returns at once, or returns the
// file's unreported failure. in is invalidated if the write fails (the
// kernel's size may be wrong then).
func (w *writeback) write(in *fs.Inode, ino, off uint64, data []byte) error {
	s := span{off: off, end: off + uint64(len(data))}
	w.mu.Lock()
	for {
		d := w.files[ino]
		if d != nil && d.err != nil {
			err := d.err
			w.mu.Unlock()
			return err
		}
		full := w.queued > 0 && w.queued+len(data) > w.limit
		if !full && (d == nil || !d.overlapsAny(s)) {
			break
		}
		w.cond.Wait()
	}
	d := w.files[ino]
	if d == nil {
		d = &dirtyInode{}
		w.files[ino] = d
	}
	d.inflight = append(d.inflight, s)
	w.queued += len(data)
	w.mu.Unlock()

	// The kernel reuses its buffer once we answer.
	buf := append([]byte(nil), data...)
	w.batch.submit(ino, off, buf, func(err error) {
		w.done(ino, s, err)
		if err != nil {
			go func() { _ = in.NotifyContent(0, 0) }()
		}
	})
	return nil
}

func (d *dirtyInode) overlapsAny(s span) bool {
	for _, o := range d.inflight {
		if o.overlaps(s) {
			return true
		}
	}
	return false
}

func (w *writeback) done(ino uint64, s span, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queued -= int(s.end - s.off)
	d := w.files[ino]
	for i, o := range d.inflight {
		if o == s {
			d.inflight = append(d.inflight[:i], d.inflight[i+1:]...)
			break
		}
	}
	if err != nil && d.err == nil {
		d.err = err
	}
	if len(d.inflight) == 0 && d.err == nil {
		delete(w.files, ino)
	}
	w.cond.Broadcast()
}

// drain waits until no write to ino is in flight.
func (w *writeback) drain(ino uint64) {
	w.mu.Lock()
	for {
		d := w.files[ino]
		if d == nil || len(d.inflight) == 0 {
			break
		}
		w.cond.Wait()
	}
	w.mu.Unlock()
}

// sync drains ino and reports (once) the first of its writes that failed.
func (w *writeback) sync(ino uint64) error {
	w.drain(ino)
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.files[ino]
	if d == nil {
		return nil
	}
	err := d.err
	if len(d.inflight) == 0 {
		delete(w.files, ino)
	} else {
		d.err = nil
	}
	return err
}

// busy reports whether ino has writes in flight.
func (w *writeback) busy(ino uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.files[ino]
	return d != nil && len(d.inflight) > 0
}
