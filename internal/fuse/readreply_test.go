package fuse

import (
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// A read reply lends its frame's pooled buffer to go-fuse, which calls Done
// once it has written the reply or abandoned it (the kernel gone, the
// request interrupted). A second Done must not return the buffer again: two
// later reads would then share it, and one would answer the other's bytes.
func TestAReadReplyReturnsItsFrameOnceWhateverCallsDone(t *testing.T) {
	frame, data := wire.ReadBuffer(1 << 20)
	r := framedRead(data, frame)
	if _, st := r.Bytes(nil); !st.Ok() {
		t.Fatal(st)
	}
	r.Done()
	r.Done() // go-fuse abandoning a reply it already finished with
	if b, _ := r.Bytes(nil); b != nil {
		t.Fatalf("a read reply still hands out %d bytes of a frame it returned to the pool", len(b))
	}
	a, b := wire.GetBuf(len(frame)), wire.GetBuf(len(frame))
	if &a[:1][0] == &b[:1][0] {
		t.Fatal("two reads got the same pooled buffer: the reply returned its frame twice")
	}
}
