package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// pageModel is the allocated pages of a file as a set: what extents must
// agree with after any sequence of operations.
type pageModel map[uint64]bool

func (m pageModel) check(t *testing.T, e extents, size uint64, step string) {
	t.Helper()
	var n uint64
	for i, x := range e {
		if x.Off >= x.End || x.Off%allocPage != 0 || x.End%allocPage != 0 {
			t.Fatalf("%s: extent %d %+v is empty or not page aligned", step, i, x)
		}
		if i > 0 && e[i-1].End >= x.Off {
			t.Fatalf("%s: extents %+v and %+v overlap or touch", step, e[i-1], x)
		}
		for p := x.Off; p < x.End; p += allocPage {
			if !m[p/allocPage] {
				t.Fatalf("%s: page %d allocated by the extents, not by the model", step, p/allocPage)
			}
			n++
		}
	}
	if int(n) != len(m) {
		t.Fatalf("%s: the extents hold %d pages, the model %d", step, n, len(m))
	}
	if e.bytes() != n*allocPage {
		t.Fatalf("%s: bytes() %d, want %d", step, e.bytes(), n*allocPage)
	}
	for off := uint64(0); off < size+2*allocPage; off += 1 + uint64(rand.IntN(3*allocPage)) {
		wantData, dataOK := uint64(0), false
		for p := off; p < size; p = (p/allocPage + 1) * allocPage {
			if m[p/allocPage] {
				wantData, dataOK = p, true
				break
			}
		}
		wantHole := size
		for p := off; p < size; p = (p/allocPage + 1) * allocPage {
			if !m[p/allocPage] {
				wantHole = p
				break
			}
		}
		if d, ok := e.seekData(off, size); ok != dataOK || (ok && d != wantData) {
			t.Fatalf("%s: seekData(%d) in %d bytes = %d %v, want %d %v", step, off, size, d, ok, wantData, dataOK)
		}
		if h, ok := e.seekHole(off, size); ok != (off < size) || (ok && h != wantHole) {
			t.Fatalf("%s: seekHole(%d) in %d bytes = %d %v, want %d", step, off, size, h, ok, wantHole)
		}
	}
}

// Random writes, punched holes and truncates over a few dozen pages agree
// with the page set they stand for: a write allocates every page it
// touches, a punch frees only the pages it covers whole, a truncate frees
// the pages past the new size.
func TestExtentsAgreeWithTheAllocatedPages(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var e extents
		m := pageModel{}
		size := uint64(0)
		for step := range 40 {
			off := uint64(rng.IntN(40 * allocPage))
			n := uint64(1 + rng.IntN(6*allocPage))
			switch rng.IntN(3) {
			case 0:
				e = e.add(off, off+n)
				for p := off / allocPage; p*allocPage < off+n; p++ {
					m[p] = true
				}
				size = max(size, off+n)
			case 1:
				e = e.remove(off, off+n)
				for p := (off + allocPage - 1) / allocPage; (p+1)*allocPage <= off+n; p++ {
					delete(m, p)
				}
			case 2:
				size = off
				e = e.truncate(size)
				for p := range m {
					if p*allocPage >= size {
						delete(m, p)
					}
				}
			}
			m.check(t, e, size, fmt.Sprintf("seed %d step %d", seed, step))
		}
	}
}
