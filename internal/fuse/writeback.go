package fuse

// Write-behind for single-writer volumes. A WRITE is answered once its data
// is queued for the engine; the commit on a quorum happens in the
// background, several engine entries at a time, so a sequential writer is
// no longer paced by one quorum round trip per request. What stays true:
//
//   - fsync and close (FLUSH) return only after every write to the file
//     before them is committed on a quorum.
//   - A write that fails after it was answered (EIO for an uncertain
//     outcome, ENOSPC, ...) is reported the way Linux reports writeback
//     errors (errseq_t): once to every file handle that was open when it
//     happened, by that handle's next fsync. Each handle keeps a cursor into
//     the file's error sequence, so one handle's fsync cannot consume the
//     error another writer still has to hear about. A handle opened while
//     the latest failure was not yet reported to anyone sees it too; one
//     opened after it was reported does not. Until a handle's fsync has
//     reported it, its further writes fail at once with that error.
//   - A close of a descriptor open for writing (FLUSH) reports the failure
//     too, but never consumes it: the kernel sends FLUSH at every close of
//     any descriptor sharing the handle, a dup'd one or one a child process
//     closes at exec (O_CLOEXEC), so a FLUSH is no proof that the program
//     writing through the handle heard of it. Its next fsync reports it
//     again. A read-only descriptor's close reports nothing.
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

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// defaultWritebackBytes bounds the data one mount holds uncommitted: eight
// engine entries of 4 MiB, the one committing and seven queued behind it
// (docs/performance.md, ## FUSE mount).
const defaultWritebackBytes = 32 << 20

type span struct{ off, end uint64 }

func (s span) overlaps(o span) bool { return s.off < o.end && o.off < s.end }

// dirtyInode is one file's writes in flight and its error sequence. It
// lives while writes are in flight, handles are open, or a failure has not
// been reported to anyone yet.
type dirtyInode struct {
	inflight []span
	// seq counts failures; err is the latest. A failure while the latest
	// one is still unreported is folded into it (errseq_set: nobody has
	// seen the first, so everybody will hear of one).
	seq      uint64
	err      error
	reported bool // some handle was told of seq
	handles  int
}

// errCursor is one file handle's position in its file's error sequence:
// the failures up to seen were reported to its fsync or happened before it
// opened; those up to flushed were reported to a close of one of its
// descriptors.
type errCursor struct {
	ino     uint64
	seen    uint64
	flushed uint64
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

// write queues data at off in the file of c and returns at once, or
// returns the failure c has not been told of. in is invalidated if the
// write fails (the kernel's size may be wrong then).
func (w *writeback) write(in *fs.Inode, c *errCursor, off uint64, data []byte) error {
	ino := c.ino
	s := span{off: off, end: off + uint64(len(data))}
	w.mu.Lock()
	for {
		d := w.files[ino]
		if d != nil && d.seq > c.seen {
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

	// The kernel reuses its buffer once we answer, so the data is copied;
	// into a pooled buffer, since a fresh one per 1 MiB WRITE was new
	// memory to fault in every time. Nothing holds it once the commit is
	// over: the client has sealed it into TLS records and the callback runs
	// after WriteBatch returns.
	buf := wire.GetBuf(len(data))
	copy(buf, data)
	w.batch.submit(ino, off, buf, func(err error) {
		wire.PutBuf(buf)
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
	if err != nil && (d.seq == 0 || d.reported) {
		d.seq++
		d.err, d.reported = err, false
	}
	w.forget(ino, d)
	w.cond.Broadcast()
}

// forget drops d once nothing refers to it: no write in flight, no open
// handle, no failure nobody was told of. Called with w.mu held.
func (w *writeback) forget(ino uint64, d *dirtyInode) {
	if len(d.inflight) == 0 && d.handles == 0 && (d.seq == 0 || d.reported) {
		delete(w.files, ino)
	}
}

// opened registers a handle of ino and returns its cursor: a failure not
// yet reported to anyone is reported to it too (errseq_sample).
func (w *writeback) opened(ino uint64) *errCursor {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.files[ino]
	if d == nil {
		d = &dirtyInode{}
		w.files[ino] = d
	}
	d.handles++
	c := &errCursor{ino: ino, seen: d.seq}
	if !d.reported && d.seq > 0 {
		c.seen = d.seq - 1
	}
	return c
}

// released unregisters c's handle. A failure its last close reported was
// heard of: the next handle does not inherit it.
func (w *writeback) released(c *errCursor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := w.files[c.ino]; d != nil {
		if c.flushed == d.seq && d.seq > c.seen {
			d.reported = true
		}
		d.handles--
		w.forget(c.ino, d)
	}
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

// sync drains c's file and reports, once to c, the failure it has not been
// told of (errseq_check_and_advance).
func (w *writeback) sync(c *errCursor) error {
	w.drain(c.ino)
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.files[c.ino]
	if d == nil || d.seq <= c.seen {
		return nil
	}
	c.seen = d.seq
	d.reported = true
	w.forget(c.ino, d)
	return d.err
}

// flush drains c's file and reports the failure c's fsync has not been told
// of, leaving it for that fsync (errseq_check without the advance).
func (w *writeback) flush(c *errCursor) error {
	w.drain(c.ino)
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.files[c.ino]
	if d == nil || d.seq <= c.seen {
		return nil
	}
	c.flushed = d.seq
	return d.err
}

// busy reports whether ino has writes in flight.
func (w *writeback) busy(ino uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.files[ino]
	return d != nil && len(d.inflight) > 0
}
