package fsm

import (
	"bytes"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// Reads fill pooled reply buffers (wire.ReadBuffer) that hold an earlier
// read's bytes: a read past the backing file's end (a file truncated up, a
// sparse tail) must still read zeros, and a read's data must be its file's.
func TestPooledReadsOfSparseTailsReadZeros(t *testing.T) {
	h := newHarness(t, Limits{})
	const size = 1 << 20
	full := h.mk(wire.KindCreate, wire.RootIno, "full")
	if r := h.do(wire.Op{Kind: wire.KindWrite, Ino: full, Data: bytes.Repeat([]byte{0xff}, size)}); r.Errno != 0 {
		t.Fatalf("write: errno %d", r.Errno)
	}
	tail := h.mk(wire.KindCreate, wire.RootIno, "tail")
	if r := h.do(wire.Op{Kind: wire.KindSetattr, Ino: tail, Valid: wire.SetSize, Size: size}); r.Errno != 0 {
		t.Fatalf("truncate up: errno %d", r.Errno)
	}
	// Truncating up stores nothing: all of the file is a hole.
	if n := h.chunkFiles(tail); n != 0 {
		t.Fatalf("truncating up stored %d chunks", n)
	}
	for range 20 {
		r := h.f.Query(&wire.Op{Kind: wire.KindRead, Ino: full, Size: size})
		if len(r.Data) != size || r.Data[0] != 0xff || r.Data[size-1] != 0xff {
			t.Fatalf("full read returned %d bytes", len(r.Data))
		}
		(&wire.Reply{Results: []wire.Result{r}}).Release()
		r = h.f.Query(&wire.Op{Kind: wire.KindRead, Ino: tail, Size: size})
		if want := make([]byte, size); !bytes.Equal(r.Data, want) {
			i := 0
			for i < len(r.Data) && r.Data[i] == 0 {
				i++
			}
			t.Fatalf("sparse tail read returned a non-zero byte at %d of %d (an earlier read's bytes in a pooled buffer)", i, len(r.Data))
		}
		(&wire.Reply{Results: []wire.Result{r}}).Release()
	}
}
