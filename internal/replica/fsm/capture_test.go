package fsm

import (
	"bytes"
	"io"
	"testing"

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
