package fsm

import "slices"

// Allocated extents of a regular file (docs/decisions/0010-chunked-store.md,
// item 5). They are replicated state, decided by the apply the same way on
// every replica, so st_blocks, statfs, the capacity check and
// SEEK_DATA/SEEK_HOLE agree everywhere, whatever each replica's chunk store
// holds. Granularity is the page: a write allocates every page it touches,
// a punched hole frees only the pages it covers whole, as ext4 does.

// allocPage is the allocation granularity in bytes.
const allocPage = 4096

// extent is the allocated bytes [Off, End), page aligned.
type extent struct{ Off, End uint64 }

// extents are sorted, disjoint and never adjacent (touching extents merge).
type extents []extent

func pageDown(v uint64) uint64 { return v &^ (allocPage - 1) }

// pageUp rounds v up to a page; values within a page of the top of the
// range stay in range (wire.MaxFileSize is far below it).
func pageUp(v uint64) uint64 { return pageDown(v + allocPage - 1) }

// add allocates every page [off, end) touches.
func (e extents) add(off, end uint64) extents {
	if off >= end {
		return e
	}
	off, end = pageDown(off), pageUp(end)
	// The extents that touch [off, end) merge with it.
	i, _ := slices.BinarySearchFunc(e, off, func(x extent, v uint64) int {
		switch {
		case x.End < v:
			return -1
		default:
			return 1
		}
	})
	j := i
	for j < len(e) && e[j].Off <= end {
		off, end = min(off, e[j].Off), max(end, e[j].End)
		j++
	}
	return slices.Replace(e, i, j, extent{off, end})
}

// remove frees the pages [off, end) covers whole.
func (e extents) remove(off, end uint64) extents {
	off, end = pageUp(off), pageDown(end)
	if off >= end {
		return e
	}
	out := make(extents, 0, len(e)+1)
	for _, x := range e {
		if x.End <= off || x.Off >= end {
			out = append(out, x)
			continue
		}
		if x.Off < off {
			out = append(out, extent{x.Off, off})
		}
		if x.End > end {
			out = append(out, extent{end, x.End})
		}
	}
	return out
}

// truncate frees the pages past size (a page size straddles stays).
func (e extents) truncate(size uint64) extents {
	return e.remove(pageUp(size), ^uint64(0)&^(allocPage-1))
}

// bytes is the allocated total.
func (e extents) bytes() uint64 {
	var n uint64
	for _, x := range e {
		n += x.End - x.Off
	}
	return n
}

// seekData is lseek(SEEK_DATA) in a file of size bytes: the first
// allocated offset at or after off, or false (ENXIO).
func (e extents) seekData(off, size uint64) (uint64, bool) {
	if off >= size {
		return 0, false
	}
	for _, x := range e {
		if x.End > off {
			if d := max(off, x.Off); d < size {
				return d, true
			}
			return 0, false
		}
	}
	return 0, false
}

// seekHole is lseek(SEEK_HOLE) in a file of size bytes: the first offset at
// or after off that is in no extent (size, the implicit hole at the end,
// at the latest), or false when off is past the end (ENXIO).
func (e extents) seekHole(off, size uint64) (uint64, bool) {
	if off >= size {
		return 0, false
	}
	for _, x := range e {
		if x.Off > off {
			break
		}
		if x.End > off {
			off = x.End
		}
	}
	return min(off, size), true
}
