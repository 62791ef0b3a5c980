package chunkstore

// Persisting a capture as a manifest, keeping and dropping manifests, and
// making a kept manifest the live state (decision 0010, items 3 and 4).
//
// Persist fdatasyncs and checksums only the captured chunks without
// checksums, which are exactly those made since the previous persist: a
// chunk gets its checksums when a persist or an install has made it
// durable, and loses them only when changed in place, which a chunk some
// kept manifest names never is. Their directories are fsync'd, then the
// manifest is written atomically (internal/durable): once the manifest is
// there, every chunk it names is durable.

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// ErrCollect is wrapped by the error of a Persist, Adopt, Restore or
// DropManifest whose own work is done and durable, when removing old
// manifests or unreferenced chunks afterwards failed: space is not given
// back until a later collection succeeds.
var ErrCollect = errors.New("chunk store: collecting unreferenced chunks failed")

// Persist writes c as a kept manifest and returns it (not to be changed:
// the store keeps it), then drops the
// manifests past the retention and collects garbage. c must stay
// unreleased until Persist returns. A nil manifest means nothing was kept;
// a manifest with an error wrapping ErrCollect means it was.
func (s *Store) Persist(c *Capture) (*Manifest, error) {
	entries, fresh, err := s.plan(c)
	if err != nil {
		return nil, fmt.Errorf("persist capture %d: %w", c.id, err)
	}
	dirs := map[uint64]bool{}
	for _, i := range fresh {
		e := &entries[i]
		sum, err := s.sumFile(chunkKey{e.Ino, e.Index, e.Version}, e.Len)
		if err != nil {
			return nil, fmt.Errorf("persist capture %d: %w", c.id, err)
		}
		e.SHA256, e.CRCs = sum.sha, sum.crcs
		dirs[e.Ino] = true
	}
	if err := s.syncDirs(dirs); err != nil {
		return nil, fmt.Errorf("persist capture %d: %w", c.id, err)
	}
	m := &Manifest{ID: c.id, Index: c.index, ChunkSize: uint32(s.chunkSize), Entries: entries}
	if err := durable.WriteFile(s.manifestPath(m.ID), m.Encode()); err != nil {
		return nil, fmt.Errorf("persist capture %d: %w", c.id, err)
	}
	s.keep(m)
	return m, s.afterKeep()
}

// plan lists the capture's chunks in manifest order, filling in the
// checksums already known, and returns the positions of the others.
func (s *Store) plan(c *Capture) (entries []Entry, fresh []int, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case c.s != s || c.released:
		return nil, nil, errors.New("capture released or of another store")
	case c.manifest != nil || s.kept[c.id] != nil:
		return nil, nil, errors.New("already persisted")
	}
	for _, ino := range slices.Sorted(maps.Keys(c.files)) {
		c.files[ino].each(func(idx uint64, ref chunkRef) {
			e := Entry{Ino: ino, Index: idx, Version: ref.ver, Len: ref.n}
			if sum := s.sums[chunkKey{ino, idx, ref.ver}]; sum != nil && sum.n == ref.n {
				e.SHA256, e.CRCs = sum.sha, sum.crcs
			} else {
				fresh = append(fresh, len(entries))
			}
			entries = append(entries, e)
		})
	}
	return entries, fresh, nil
}

// syncDirs makes the entries of new chunks durable: their files'
// directories, then chunks/ for directories made since the last sync.
func (s *Store) syncDirs(inos map[uint64]bool) error {
	if len(inos) == 0 {
		return nil
	}
	for ino := range inos {
		if err := durable.SyncDir(s.inoDir(ino)); err != nil {
			return err
		}
	}
	return durable.SyncDir(filepath.Join(s.dir, chunksDir))
}

// keep records a durable manifest and the checksums it names.
func (s *Store) keep(m *Manifest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept[m.ID] = m
	for i := range m.Entries {
		e := &m.Entries[i]
		k := chunkKey{e.Ino, e.Index, e.Version}
		if s.sums[k] == nil {
			s.sums[k] = e.sum()
		}
	}
	s.repin()
}

// afterKeep drops the oldest manifests past the retention, then collects.
func (s *Store) afterKeep() error {
	s.mu.RLock()
	ids := slices.Sorted(maps.Keys(s.kept))
	s.mu.RUnlock()
	for len(ids) > s.retain {
		if err := s.dropManifest(ids[0]); err != nil {
			return fmt.Errorf("%w: %w", ErrCollect, err)
		}
		ids = ids[1:]
	}
	if err := s.collect(false); err != nil {
		return fmt.Errorf("%w: %w", ErrCollect, err)
	}
	return nil
}

// DropManifest removes a kept manifest (its checkpoint was reaped or its
// sink cancelled) and collects the chunks only it held. Dropping one that
// is not kept does nothing.
func (s *Store) DropManifest(id uint64) error {
	if err := s.dropManifest(id); err != nil {
		return err
	}
	if err := s.collect(false); err != nil {
		return fmt.Errorf("%w: %w", ErrCollect, err)
	}
	return nil
}

// dropManifest removes the file first, durably: chunks are collected only
// once no crash can bring back a manifest naming them.
func (s *Store) dropManifest(id uint64) error {
	s.mu.RLock()
	_, ok := s.kept[id]
	s.mu.RUnlock()
	if !ok {
		return nil
	}
	if err := durable.RemoveFile(s.manifestPath(id)); err != nil {
		return fmt.Errorf("drop manifest %d: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.kept, id)
	s.repin()
	return nil
}

// Manifests returns the kept manifests' IDs, oldest first.
func (s *Store) Manifests() []uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.kept))
}

// Manifest returns a kept manifest; it must not be changed.
func (s *Store) Manifest(id uint64) (*Manifest, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.kept[id]
	return m, ok
}

// OpenManifest returns a view of a kept manifest that pins its chunks
// until released, for reading them while the manifest may be dropped (a
// transfer to a follower).
func (s *Store) OpenManifest(id uint64) (*Capture, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.kept[id]
	if m == nil {
		return nil, fmt.Errorf("open manifest %d: not kept", id)
	}
	c := &Capture{s: s, id: id, index: m.Index, files: mapsOf(m), manifest: m}
	s.captures[c] = struct{}{}
	s.repin()
	return c, nil
}

// Restore makes a kept manifest the live state, copying nothing: its
// chunks are sealed and the caller replays its journal after m.Index on
// top. Live chunks it does not name are collected.
func (s *Store) Restore(id uint64) error {
	s.mu.Lock()
	m := s.kept[id]
	if m == nil {
		s.mu.Unlock()
		return fmt.Errorf("restore manifest %d: not kept", id)
	}
	s.setLive(m)
	s.mu.Unlock()
	if err := s.collect(false); err != nil {
		return fmt.Errorf("%w: %w", ErrCollect, err)
	}
	return nil
}

// Reset empties the live state (every file a hole), for a caller whose
// journal replays from its very start: the kept manifests stay.
func (s *Store) Reset() error {
	s.mu.Lock()
	s.setLive(&Manifest{})
	s.mu.Unlock()
	if err := s.collect(false); err != nil {
		return fmt.Errorf("%w: %w", ErrCollect, err)
	}
	return nil
}

// setLive replaces the live maps with m's and starts a generation, so no
// new chunk takes the name of a live one about to be collected.
func (s *Store) setLive(m *Manifest) {
	for k, fh := range s.handles {
		fh.Close()
		delete(s.handles, k)
	}
	s.files = mapsOf(m)
	s.bumpGeneration()
}

// mapsOf builds the file maps a manifest names. Generation 0 made them,
// so the first change of each clones it (filemap.go): the maps may be a
// view's as well.
func mapsOf(m *Manifest) map[uint64]*fileMap {
	files := map[uint64]*fileMap{}
	for _, e := range m.Entries {
		fm := files[e.Ino]
		if fm == nil {
			fm = newFileMap(0)
			files[e.Ino] = fm
		}
		fm.set(0, e.Index, chunkRef{ver: e.Version, n: e.Len})
	}
	return files
}
