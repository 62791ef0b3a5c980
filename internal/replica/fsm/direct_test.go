package fsm

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// TestLargeAndSmallWritesInterleavedReadBackAsWritten applies writes of
// every alignment and size, overlapping each other (large ones partly
// around the page cache, small ones and the unaligned ends of large ones
// through it), with truncations between them, and compares the backing file
// with a model after each, through a handle of its own: both paths must be
// one file.
func TestLargeAndSmallWritesInterleavedReadBackAsWritten(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			h := newHarness(t, Limits{})
			h.f.files.noDirect = !direct
			file := h.mk(wire.KindCreate, wire.RootIno, "f")
			rng := rand.New(rand.NewSource(7))
			var model []byte
			for i := range 60 {
				var off, n int
				switch i % 4 {
				case 0: // large, unaligned both ends
					off, n = rng.Intn(3<<20), directMin+rng.Intn(2<<20)
				case 1: // large, aligned
					off, n = rng.Intn(768)*4096, 1<<20
				case 2: // small, anywhere (often inside the last large write)
					off, n = rng.Intn(4<<20), 1+rng.Intn(9000)
				case 3:
					if i%12 == 3 { // shrink, so the next writes extend again
						size := rng.Intn(len(model) + 1)
						if r := h.do(wire.Op{Kind: wire.KindTruncate, Ino: file, Size: uint64(size)}); r.Errno != 0 {
							t.Fatalf("truncate to %d: %v", size, errnoOf(r))
						}
						model = model[:size]
						continue
					}
					off, n = rng.Intn(4<<20), directMin-1
				}
				data := make([]byte, n)
				rng.Read(data)
				if r := h.do(wire.Op{Kind: wire.KindWrite, Ino: file, Offset: uint64(off), Data: data}); r.Errno != 0 {
					t.Fatalf("write %d bytes at %d: %v", n, off, errnoOf(r))
				}
				if end := off + n; end > len(model) {
					model = append(model, make([]byte, end-len(model))...)
				}
				copy(model[off:], data)
				got, err := os.ReadFile(h.f.files.path(file))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, model) {
					k := 0
					for k < min(len(got), len(model)) && got[k] == model[k] {
						k++
					}
					t.Fatalf("after write %d (%d bytes at %d): backing file of %d bytes differs from the model of %d at byte %d",
						i, n, off, len(got), len(model), k)
				}
			}
			switch took := len(h.f.files.direct) > 0; {
			case direct && h.f.files.noDirect:
				t.Skipf("the filesystem of %s refuses O_DIRECT; the buffered case covers it", h.f.files.dir)
			case direct != took:
				t.Fatalf("direct=%v, yet O_DIRECT descriptors open: %v", direct, took)
			}
		})
	}
}
