package chunkstore

// Open without copying (decision 0010, item 4): the newest manifest that
// verifies becomes the live state, its chunks sealed; the caller replays
// its journal on top. A manifest verifies when its own checksum holds and
// every chunk it names is present at its recorded length. The chunks'
// bytes are checked when read (verify.go) or by Verify, not here: reading
// the whole volume at every start is what the chunked store removes.
//
// A manifest that does not verify (torn, damaged, or naming a chunk that
// is gone) is removed and reported by Refused; an older one then serves.
// Whether that still follows the caller's journal is the caller's check
// (docs/journal-format.md, "Recovery").

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cellfleet/cellfleet/internal/durable"
)

func (s *Store) load() error {
	ids, err := s.listManifests()
	if err != nil {
		return err
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	var newest *Manifest
	for _, id := range ids {
		s.gen = max(s.gen, id+1)
		m, err := s.readManifest(id)
		if err == nil {
			err = s.checkChunks(m)
		}
		if errors.Is(err, ErrCorrupt) {
			s.refused = append(s.refused, fmt.Errorf("manifest %d: %w", id, err))
			if err := durable.RemoveFile(s.manifestPath(id)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		s.keep(m)
		if newest == nil {
			newest = m
		}
	}
	if newest != nil {
		s.files = mapsOf(newest)
	}
	return nil
}

// listManifests returns the manifest IDs on disk, removing the temporary
// file of a write a crash interrupted (durable.TempSuffix).
func (s *Store) listManifests() ([]uint64, error) {
	dir := filepath.Join(s.dir, manifestsDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list manifests: %w", err)
	}
	var ids []uint64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), durable.TempSuffix) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return nil, fmt.Errorf("remove an interrupted manifest: %w", err)
			}
			continue
		}
		id, ok := parseManifestName(e.Name())
		if !ok || !e.Type().IsRegular() {
			return nil, fmt.Errorf("stray entry %q in %s", clip([]byte(e.Name())), dir)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func (s *Store) readManifest(id uint64) (*Manifest, error) {
	f, err := os.Open(s.manifestPath(id))
	if err != nil {
		return nil, fmt.Errorf("open manifest: %w", err)
	}
	defer f.Close()
	m, err := DecodeManifest(f)
	if err != nil {
		return nil, err
	}
	if m.ID != id || m.ChunkSize != uint32(s.chunkSize) {
		return nil, fmt.Errorf("%w: manifest file %d holds manifest %d of %d-byte chunks", ErrCorrupt, id, m.ID, m.ChunkSize)
	}
	return m, nil
}

// checkChunks checks that every chunk m names is there at its length.
func (s *Store) checkChunks(m *Manifest) error {
	for _, e := range m.Entries {
		path := s.chunkPath(chunkKey{e.Ino, e.Index, e.Version})
		fi, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: chunk %s is missing", ErrCorrupt, path)
		}
		if err != nil {
			return fmt.Errorf("check manifest %d: %w", m.ID, err)
		}
		if !fi.Mode().IsRegular() || fi.Size() != int64(e.Len) {
			return fmt.Errorf("%w: chunk %s holds %d bytes, not %d", ErrCorrupt, path, fi.Size(), e.Len)
		}
	}
	return nil
}

// Verify reads every chunk of a kept manifest and checks its SHA-256 (the
// start-up check the caller makes of the checkpoint it will restore).
func (s *Store) Verify(id uint64) error {
	v, err := s.OpenManifest(id)
	if err != nil {
		return err
	}
	defer v.Release()
	for _, e := range v.manifest.Entries {
		if _, err := v.ReadChunk(e.Ino, e.Index); err != nil {
			return fmt.Errorf("verify manifest %d: %w", id, err)
		}
	}
	return nil
}
