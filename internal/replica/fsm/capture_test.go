package fsm

import (
	"bytes"
	"io"
	"syscall"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/journal"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

func TestCheckpointHoldsTheCapturedBytesWhileTheFileIsWrittenTruncatedAndRemoved(t *testing.T) {
	h := newHarness(t, Limits{})
	a := h.mk(wire.KindCreate, wire.RootIno, "a")
	b := h.mk(wire.KindCreate, wire.RootIno, "b")
	c := h.mk(wire.KindCreate, wire.RootIno, "c")
	for _, ino := range []uint64{a, b, c} {
		h.do(wire.Op{Kind: wire.KindWrite, Ino: ino, Data: []byte("captured")})
	}
	_, want, _ := h.f.Digest()
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	h.do(wire.Op{Kind: wire.KindWrite, Ino: a, Data: []byte("CHANGED!")})
	h.do(wire.Op{Kind: wire.KindTruncate, Ino: b, Size: 2})
	h.do(wire.Op{Kind: wire.KindUnlink, Ino: wire.RootIno, Name: "c"})
	if r := h.f.Query(&wire.Op{Kind: wire.KindRead, Ino: a, Size: 8}); string(r.Data) != "CHANGED!" {
		t.Fatalf("the live file reads %q after its write", r.Data)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	other := newHarness(t, Limits{})
	if err := other.f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := other.f.Digest(); got != want {
		t.Fatalf("the checkpoint holds bytes written after its capture")
	}
}

// A write at or past a captured file's end, on a block boundary, changes
// none of the captured bytes and is made in place; an append at an
// unaligned end (it would rewrite the block holding the captured tail) and
// a rewrite copy the file first. Either way the checkpoints restore what
// they captured.
func TestWritesPastABlockAlignedEndOfACapturedFileAreNotCopied(t *testing.T) {
	h := newHarness(t, Limits{})
	f := h.mk(wire.KindCreate, wire.RootIno, "f")
	h.fill(f, pattern(4<<20))
	backing := func() uint64 {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(h.f.files.path(f), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	// A store of its own for each checkpoint: a store keeps only two.
	var stores []*journal.CheckpointStore
	var ids, wants []string
	checkpoint := func() {
		t.Helper()
		_, want, err := h.f.Digest()
		if err != nil {
			t.Fatal(err)
		}
		store := openStore(t, t.TempDir())
		stores, ids, wants = append(stores, store), append(ids, checkpointThroughStore(t, h, store, nil)), append(wants, want)
	}
	write := func(off uint64, data []byte) {
		t.Helper()
		if r := h.do(wire.Op{Kind: wire.KindWrite, Ino: f, Offset: off, Data: data}); r.Errno != 0 {
			t.Fatalf("write at %d: errno %d", off, r.Errno)
		}
	}

	checkpoint()
	before := backing()
	write(4<<20, pattern(1<<20))
	write(6<<20, []byte("past a hole")) // 5 MiB was the end: aligned
	if got := backing(); got != before {
		t.Fatalf("writes past the block-aligned end of a captured file copied it (backing inode %d, then %d)", before, got)
	}
	checkpoint()
	write(6<<20+uint64(len("past a hole")), []byte("appended at an unaligned end"))
	if got := backing(); got == before {
		t.Fatalf("an append at the unaligned end of a captured file was made in place: it rewrites the block holding the captured tail")
	}
	checkpoint()
	before = backing()
	write(1<<20, []byte("rewritten"))
	if got := backing(); got == before {
		t.Fatalf("a rewrite of a captured file was made in place")
	}
	// A write of no bytes past the end grows the file's size but not its
	// backing file: a write between the two is below the captured end.
	end := uint64(8 << 20)
	write(end, pattern(1<<20))
	write(end+2<<20, nil)
	checkpoint()
	before = backing()
	write(end+1<<20, []byte("inside the captured size"))
	if got := backing(); got == before {
		t.Fatalf("a write below the captured size, past the backing file's end, was made in place")
	}

	for i, id := range ids {
		if got := restoredDigest(t, stores[i], id); got != wants[i] {
			t.Fatalf("checkpoint %d restores a state other than the one it captured", i)
		}
	}
}
