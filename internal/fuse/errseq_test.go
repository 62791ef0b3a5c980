package fuse

import (
	"errors"
	"syscall"
	"testing"
)

// fail records one failed write-behind commit of ino, as the batcher's
// notification does.
func (w *writeback) fail(ino uint64, err error) {
	s := span{off: 0, end: 1}
	w.mu.Lock()
	d := w.files[ino]
	if d == nil {
		d = &dirtyInode{}
		w.files[ino] = d
	}
	d.inflight = append(d.inflight, s)
	w.queued++
	w.mu.Unlock()
	w.done(ino, s, err)
}

// TestWriteBehindErrorsFollowLinuxErrseqRules: the cursor rules that
// decide which handle hears of which failure, and that a file's record is
// dropped once nobody needs it (no leak per file ever written).
func TestWriteBehindErrorsFollowLinuxErrseqRules(t *testing.T) {
	const ino = 7
	w := newWriteback(nil, 0)
	a, b := w.opened(ino), w.opened(ino)
	w.fail(ino, syscall.ENOSPC)
	w.fail(ino, syscall.EIO) // folded: nobody has heard of the first yet
	if err := w.sync(a); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the first handle's sync: %v, want the first failure, ENOSPC", err)
	}
	if err := w.sync(a); err != nil {
		t.Fatalf("a failure is reported once per handle; the second sync: %v", err)
	}
	late := w.opened(ino) // after it was reported: does not see it
	if err := w.sync(late); err != nil {
		t.Fatalf("a handle opened after the report: %v, want nil", err)
	}
	w.fail(ino, syscall.EIO) // a new failure after a report is a new error
	if err := w.sync(b); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the second handle hears of the latest failure: %v, want EIO", err)
	}
	if err := w.sync(a); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the first handle hears of the new failure: %v, want EIO", err)
	}
	if err := w.sync(late); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the late handle was open when the new failure happened: %v, want EIO", err)
	}
	for _, c := range []*errCursor{a, b, late} {
		w.released(c)
	}
	if len(w.files) != 0 {
		t.Fatalf("%d file records are kept after every handle closed and every failure was reported", len(w.files))
	}

	// A failure nobody heard of (every handle closed without being told)
	// is reported to the next handle, as Linux does.
	c := w.opened(ino)
	w.fail(ino, syscall.ENOSPC)
	w.released(c)
	next := w.opened(ino)
	if err := w.sync(next); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a failure nobody was told of must reach the next handle: %v", err)
	}
	w.released(next)
	if len(w.files) != 0 {
		t.Fatalf("%d file records are kept after the last failure was reported", len(w.files))
	}
}
