package chunkstore

// A file's map chunk index → version, shared with captures by generation.
//
// A capture must cost O(files), with no work per chunk (decision 0010,
// item 2), so it cannot copy the maps. Instead every map object carries
// the generation that made it (owner): a capture records the pointers and
// bumps the generation, after which every existing object is read-only and
// the first change clones it. A file's map is two levels, pages of
// pageLen chunks under a sparse map, so that the first write after a
// capture clones one page (pageLen entries) and the page table, never the
// whole map of a large file.

import (
	"maps"
	"slices"
)

const (
	pageShift = 9
	pageLen   = 1 << pageShift
)

// chunkRef is one chunk of a file: its version (0: a hole) and its length,
// the size of its file (bytes past it, up to the chunk size, read as
// zeros). A present chunk has n > 0.
type chunkRef struct {
	ver uint64
	n   uint32
}

type page struct {
	owner uint64
	used  int // present chunks
	refs  [pageLen]chunkRef
}

type fileMap struct {
	owner  uint64
	chunks int // present chunks
	pages  map[uint64]*page
}

func newFileMap(gen uint64) *fileMap { return &fileMap{owner: gen, pages: map[uint64]*page{}} }

func (m *fileMap) get(idx uint64) chunkRef {
	if p := m.pages[idx>>pageShift]; p != nil {
		return p.refs[idx&(pageLen-1)]
	}
	return chunkRef{}
}

// mutable returns m itself when generation gen made it, else a clone
// (the original may be held by a capture).
func (m *fileMap) mutable(gen uint64) *fileMap {
	if m.owner == gen {
		return m
	}
	return &fileMap{owner: gen, chunks: m.chunks, pages: maps.Clone(m.pages)}
}

// set records ref at idx; m must be mutable at gen.
func (m *fileMap) set(gen, idx uint64, ref chunkRef) {
	pi := idx >> pageShift
	p := m.pages[pi]
	switch {
	case p == nil && ref.ver == 0:
		return
	case p == nil:
		p = &page{owner: gen}
	case p.owner != gen:
		c := *p
		c.owner = gen
		p = &c
	}
	old := p.refs[idx&(pageLen-1)]
	p.refs[idx&(pageLen-1)] = ref
	p.used += present(ref) - present(old)
	m.chunks += present(ref) - present(old)
	if p.used == 0 {
		delete(m.pages, pi)
		return
	}
	m.pages[pi] = p
}

func present(r chunkRef) int {
	if r.ver != 0 {
		return 1
	}
	return 0
}

// each calls fn for every present chunk in index order.
func (m *fileMap) each(fn func(idx uint64, ref chunkRef)) {
	for _, pi := range slices.Sorted(maps.Keys(m.pages)) {
		p := m.pages[pi]
		for i, r := range p.refs {
			if r.ver != 0 {
				fn(pi<<pageShift|uint64(i), r)
			}
		}
	}
}

// from lists the present chunks at index first or above, in order.
func (m *fileMap) from(first uint64) []uint64 {
	var out []uint64
	for _, pi := range slices.Sorted(maps.Keys(m.pages)) {
		if pi < first>>pageShift {
			continue
		}
		for i, r := range m.pages[pi].refs {
			if idx := pi<<pageShift | uint64(i); r.ver != 0 && idx >= first {
				out = append(out, idx)
			}
		}
	}
	return out
}
