package chunkstore

// Garbage collection (decision 0010, item 3): a chunk file that no live
// map, unreleased capture, kept manifest or pending install names is
// removed, after a manifest is kept or dropped, after a restore, and at
// Open.
//
// The roots are taken under the lock, the files listed and removed
// without it. A chunk that was not a root then cannot become one (nothing
// brings back an old version), and a chunk made meanwhile has a version at
// or above the generation the roots were taken at and is left alone. At
// Open nothing runs concurrently, so every chunk that is not a root goes,
// whatever its version: those are what the journal tail will write again.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Collect removes the chunk files nothing holds now. The store collects
// by itself when a manifest is kept or dropped, after Restore and at Open;
// a caller calls Collect after releasing a capture it did not persist
// (a digest's, a failed checkpoint's) to give its old versions back sooner.
func (s *Store) Collect() error { return s.collect(false) }

func (s *Store) collect(atOpen bool) error {
	s.mu.RLock()
	roots, live, genAt := s.roots(), s.liveInos(), s.gen
	s.mu.RUnlock()
	top := filepath.Join(s.dir, chunksDir)
	dirs, err := os.ReadDir(top)
	if err != nil {
		return fmt.Errorf("list chunks: %w", err)
	}
	var removed []chunkKey
	var gone []uint64
	for _, d := range dirs {
		ino, ok := parseHex(d.Name())
		if !ok || ino == 0 || !d.IsDir() {
			return fmt.Errorf("stray entry %q in %s", clip([]byte(d.Name())), top)
		}
		keys, left, err := s.collectFile(ino, roots, genAt, atOpen)
		removed = append(removed, keys...)
		if err != nil {
			s.forget(removed, gone)
			return err
		}
		if left == 0 && !live[ino] && os.Remove(s.inoDir(ino)) == nil {
			gone = append(gone, ino)
		}
	}
	s.forget(removed, gone)
	return nil
}

// collectFile removes one file's unreferenced chunks and counts the rest.
func (s *Store) collectFile(ino uint64, roots map[chunkKey]struct{}, genAt uint64, atOpen bool) (removed []chunkKey, left int, err error) {
	dir := s.inoDir(ino)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("list chunks: %w", err)
	}
	for _, e := range ents {
		idx, ver, ok := s.parseChunkName(e.Name())
		if !ok || !e.Type().IsRegular() {
			return removed, 0, fmt.Errorf("stray entry %q in %s", clip([]byte(e.Name())), dir)
		}
		k := chunkKey{ino, idx, ver}
		if _, root := roots[k]; root || (!atOpen && ver >= genAt) {
			left++
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, 0, fmt.Errorf("remove chunk: %w", err)
		}
		s.stats.removed.Add(1)
		removed = append(removed, k)
	}
	return removed, left, nil
}

// forget drops what the store knew of removed chunks and directories.
func (s *Store) forget(removed []chunkKey, gone []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range removed {
		delete(s.sums, k)
	}
	for _, ino := range gone {
		delete(s.dirs, ino)
	}
}

// roots names every chunk something still holds; the lock is held.
func (s *Store) roots() map[chunkKey]struct{} {
	r := map[chunkKey]struct{}{}
	add := func(files map[uint64]*fileMap) {
		for ino, fm := range files {
			fm.each(func(idx uint64, ref chunkRef) { r[chunkKey{ino, idx, ref.ver}] = struct{}{} })
		}
	}
	add(s.files)
	for c := range s.captures {
		add(c.files)
	}
	for _, m := range s.kept {
		for _, e := range m.Entries {
			r[chunkKey{e.Ino, e.Index, e.Version}] = struct{}{}
		}
	}
	for k := range s.installed {
		r[k] = struct{}{}
	}
	return r
}

func (s *Store) liveInos() map[uint64]bool {
	live := make(map[uint64]bool, len(s.files))
	for ino := range s.files {
		live[ino] = true
	}
	return live
}
