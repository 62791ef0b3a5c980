package chunkstore

// Rebuilds that send only what a follower lacks (decision 0010, item 6).
//
// The coordinator sends a kept manifest's bytes (Manifest.Encode, from a
// view OpenManifest pins). The follower decodes it (DecodeManifest), asks
// Missing which chunks it does not hold, receives those (read on the
// coordinator by ReadChunk, which checks them before they leave), installs
// each with Install, which refuses one whose SHA-256 or CRCs differ from
// the manifest's, and then Adopt writes its own manifest naming its own
// files and makes it the live state.
//
// A chunk counts as held when this store has checksums for a chunk of the
// same file and index with the same SHA-256: one a kept manifest or an
// earlier install recorded. Chunks written since the last persist have no
// checksums and are sent again. Installed chunks are held only in memory
// until Adopt: a restart in the middle of a transfer collects them and the
// transfer starts over.

import (
	"crypto/sha256"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// held names a chunk by content.
type held struct {
	ino, idx uint64
	sha      [sha256.Size]byte
}

// heldChunks maps what the store holds to its versions; the lock is held.
func (s *Store) heldChunks() map[held]uint64 {
	out := make(map[held]uint64, len(s.sums))
	for k, sum := range s.sums {
		out[held{k.ino, k.idx, sum.sha}] = k.ver
	}
	return out
}

// Missing returns the entries of m, a manifest received from another
// replica, whose chunks this store does not hold.
func (s *Store) Missing(m *Manifest) []Entry {
	s.mu.RLock()
	have := s.heldChunks()
	s.mu.RUnlock()
	var out []Entry
	for _, e := range m.Entries {
		if _, ok := have[held{e.Ino, e.Index, e.SHA256}]; !ok {
			out = append(out, e)
		}
	}
	return out
}

// Install stores a received chunk after checking it against its entry:
// the length, the SHA-256 and every CRC-32C. A mismatch is an error
// wrapping ErrCorrupt and nothing is written. The chunk is fdatasync'd;
// Adopt syncs its directory.
func (s *Store) Install(m *Manifest, e Entry, data []byte) error {
	if m.ChunkSize != uint32(s.chunkSize) {
		return fmt.Errorf("install: manifest of %d-byte chunks into a store of %d", m.ChunkSize, s.chunkSize)
	}
	if err := checkEntry(m, &e); err != nil {
		return fmt.Errorf("install chunk %d of inode %d: %w", e.Index, e.Ino, err)
	}
	if len(data) != int(e.Len) || !sumOf(data).equal(e.sum()) {
		return fmt.Errorf("%w: received chunk %d of inode %d does not match its digest", ErrCorrupt, e.Index, e.Ino)
	}
	s.mu.Lock()
	k := chunkKey{e.Ino, e.Index, s.uniqueVersion()}
	fh, err := s.createFile(k)
	if err == nil {
		s.installed[k] = struct{}{}
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("install chunk %d of inode %d: %w", e.Index, e.Ino, err)
	}
	if err := writeSynced(fh, data); err != nil {
		return fmt.Errorf("install chunk %s: %w", s.chunkPath(k), err)
	}
	s.stats.synced.Add(1)
	sum := e.sum()
	sum.crcs = slices.Clone(sum.crcs) // the caller's entry may be reused
	s.mu.Lock()
	s.sums[k] = sum
	s.mu.Unlock()
	return nil
}

func writeSynced(fh *os.File, data []byte) error {
	defer fh.Close()
	if _, err := fh.Write(data); err != nil {
		return err
	}
	return unix.Fdatasync(int(fh.Fd()))
}

// Adopt makes m, a manifest received from another replica whose chunks
// are now all held, this store's newest kept manifest and its live state,
// naming this store's own files. It returns the local manifest.
func (s *Store) Adopt(m *Manifest) (*Manifest, error) {
	if m.ChunkSize != uint32(s.chunkSize) {
		return nil, fmt.Errorf("adopt: manifest of %d-byte chunks into a store of %d", m.ChunkSize, s.chunkSize)
	}
	local, dirs, err := s.localEntries(m)
	if err != nil {
		return nil, err
	}
	if err := s.syncDirs(dirs); err != nil {
		return nil, fmt.Errorf("adopt manifest of index %d: %w", m.Index, err)
	}
	s.mu.Lock()
	lm := &Manifest{ID: s.bumpGeneration(), Index: m.Index, ChunkSize: m.ChunkSize, Entries: local}
	s.mu.Unlock()
	if err := durable.WriteFile(s.manifestPath(lm.ID), lm.Encode()); err != nil {
		return nil, fmt.Errorf("adopt manifest of index %d: %w", m.Index, err)
	}
	s.keep(lm)
	s.mu.Lock()
	s.setLive(lm)
	clear(s.installed)
	s.mu.Unlock()
	return lm, s.afterKeep()
}

// localEntries maps m's entries to chunks this store holds, and names the
// directories of installed chunks, whose entries are not yet durable.
func (s *Store) localEntries(m *Manifest) ([]Entry, map[uint64]bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	have := s.heldChunks()
	local := make([]Entry, len(m.Entries))
	for i, e := range m.Entries {
		ver, ok := have[held{e.Ino, e.Index, e.SHA256}]
		if !ok {
			return nil, nil, fmt.Errorf("adopt manifest of index %d: chunk %d of inode %d was never installed", m.Index, e.Index, e.Ino)
		}
		e.Version = ver
		local[i] = e
	}
	dirs := map[uint64]bool{}
	for k := range s.installed {
		dirs[k.ino] = true
	}
	return local, dirs, nil
}

// ReadChunk returns the whole of chunk idx of file ino as captured,
// checked against its SHA-256 (a chunk leaves for a follower only
// verified). The capture must be a persisted one's view (OpenManifest).
func (c *Capture) ReadChunk(ino, idx uint64) ([]byte, error) {
	fm := c.files[ino]
	if fm == nil || fm.get(idx).ver == 0 {
		return nil, fmt.Errorf("read chunk %d of inode %d: not in manifest %d", idx, ino, c.id)
	}
	ref := fm.get(idx)
	k := chunkKey{ino, idx, ref.ver}
	c.s.mu.RLock()
	sum, released := c.s.sums[k], c.released
	c.s.mu.RUnlock()
	if released {
		return nil, fmt.Errorf("capture %d: read after release", c.id)
	}
	if sum == nil || sum.n != ref.n {
		return nil, fmt.Errorf("read chunk %s: no checksums (not a persisted capture)", c.s.chunkPath(k))
	}
	data := make([]byte, ref.n)
	f, err := os.Open(c.s.chunkPath(k))
	if err != nil {
		return nil, fmt.Errorf("read chunk: %w", err)
	}
	defer f.Close()
	if err := c.s.readBlocks(f, k, sum, 0, data); err != nil {
		return nil, err
	}
	if sha256.Sum256(data) != sum.sha {
		return nil, fmt.Errorf("%w: chunk %s fails its SHA-256", ErrCorrupt, c.s.chunkPath(k))
	}
	return data, nil
}
