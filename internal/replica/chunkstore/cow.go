package chunkstore

// Copy-on-write per chunk (decision 0010, item 2).
//
// Versions and capture IDs come from one counter: a chunk made in
// generation v holds version v, and a capture taken in generation g has ID
// g and starts generation g+1. A chunk still live with version v was
// therefore live, unchanged since its last in-place write, at every
// capture with an ID at or above v, and at none below. So a chunk is
// referenced by some unreleased capture or kept manifest exactly when its
// version is at most the highest ID among them (pinned): one comparison
// decides whether a write may change it in place, with no per-chunk
// bookkeeping at capture time.
//
// A sealed chunk is changed by making the next version: a new file, given
// the bytes of the old one that the change keeps (a reflink where the file
// system has FICLONE, else a copy; nothing when the change overwrites them
// all), then changed. The old file stays for the captures and manifests
// that name it, until garbage collection (gc.go).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxHandles bounds the live chunks kept open.
const maxHandles = 256

func (s *Store) sealed(ver uint64) bool { return ver <= s.pinned }

// repin recomputes pinned after a capture, manifest or release changed.
func (s *Store) repin() {
	var p uint64
	for id := range s.kept {
		p = max(p, id)
	}
	for c := range s.captures {
		p = max(p, c.id)
	}
	s.pinned = p
}

// writable returns an open file for changing chunk idx of ino, now cur,
// and the chunk's new reference. A hole gets a new empty chunk; a chunk no
// capture or manifest holds is changed in place (its checksums are then
// stale and dropped); a sealed one gets the next version holding its first
// keep bytes. The write lock is held.
func (s *Store) writable(ino, idx uint64, cur chunkRef, keep uint32) (*os.File, chunkRef, error) {
	if cur.ver == 0 {
		k, fh, err := s.createChunk(ino, idx)
		return fh, chunkRef{ver: k.ver}, err
	}
	old := chunkKey{ino, idx, cur.ver}
	if !s.sealed(cur.ver) {
		fh, err := s.handle(old)
		delete(s.sums, old)
		return fh, cur, err
	}
	k, fh, err := s.createChunk(ino, idx)
	if err != nil {
		return nil, chunkRef{}, err
	}
	if keep > 0 {
		if err := s.copyChunk(fh, old, keep); err != nil {
			s.discard(k)
			return nil, chunkRef{}, err
		}
	}
	s.closeHandle(old)
	return fh, chunkRef{ver: k.ver, n: keep}, nil
}

// createChunk makes the file of a new chunk at the current generation.
func (s *Store) createChunk(ino, idx uint64) (chunkKey, *os.File, error) {
	k := chunkKey{ino, idx, s.gen}
	fh, err := s.createFile(k)
	if errors.Is(err, os.ErrNotExist) && s.dirs[ino] {
		// Collection removed the empty directory meanwhile (gc.go).
		delete(s.dirs, ino)
		fh, err = s.createFile(k)
	}
	if err != nil {
		return k, nil, fmt.Errorf("create chunk: %w", err)
	}
	s.putHandle(k, fh)
	return k, fh, nil
}

func (s *Store) createFile(k chunkKey) (*os.File, error) {
	if !s.dirs[k.ino] {
		if err := os.Mkdir(s.inoDir(k.ino), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		s.dirs[k.ino] = true
	}
	return os.OpenFile(s.chunkPath(k), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// copyChunk gives dst the first n bytes of chunk src: a reflink cut to n,
// else a copy. A chunk with checksums is verified as it is copied, so a
// damaged sealed chunk is never carried into a new version whose fresh
// checksums would hide the damage.
func (s *Store) copyChunk(dst *os.File, src chunkKey, n uint32) error {
	sf, err := os.Open(s.chunkPath(src))
	if err != nil {
		return fmt.Errorf("copy-on-write: %w", err)
	}
	defer sf.Close()
	sum := s.sums[src]
	if unix.IoctlFileClone(int(dst.Fd()), int(sf.Fd())) == nil {
		if err := dst.Truncate(int64(n)); err != nil {
			return fmt.Errorf("copy-on-write: %w", err)
		}
		s.stats.cloned.Add(1)
		if sum == nil {
			return nil
		}
		return s.verifyPrefix(sf, src, sum, n, nil)
	}
	s.stats.copied.Add(1)
	if sum != nil {
		return s.verifyPrefix(sf, src, sum, n, dst)
	}
	k, err := io.Copy(dst, io.LimitReader(sf, int64(n)))
	if err != nil {
		return fmt.Errorf("copy-on-write: %w", err)
	}
	if k != int64(n) {
		return fmt.Errorf("%w: chunk %s holds %d bytes, not %d", ErrCorrupt, s.chunkPath(src), k, n)
	}
	return nil
}

// handle returns an open file of a live chunk.
func (s *Store) handle(k chunkKey) (*os.File, error) {
	if fh := s.handles[k]; fh != nil {
		return fh, nil
	}
	fh, err := os.OpenFile(s.chunkPath(k), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open chunk: %w", err)
	}
	s.putHandle(k, fh)
	return fh, nil
}

func (s *Store) putHandle(k chunkKey, fh *os.File) {
	if len(s.handles) >= maxHandles {
		for old, h := range s.handles { // any victim will do
			h.Close()
			delete(s.handles, old)
			break
		}
	}
	s.handles[k] = fh
}

func (s *Store) closeHandle(k chunkKey) {
	if fh := s.handles[k]; fh != nil {
		fh.Close()
		delete(s.handles, k)
	}
}

// discard removes a chunk no map references yet (a failed copy).
func (s *Store) discard(k chunkKey) {
	s.closeHandle(k)
	_ = os.Remove(s.chunkPath(k))
}

// drop makes chunk idx of ino a hole; its file goes at once when nothing
// else holds it, else at collection.
func (s *Store) drop(fm *fileMap, ino, idx uint64, cur chunkRef) error {
	fm.set(s.gen, idx, chunkRef{})
	if s.sealed(cur.ver) {
		return nil
	}
	k := chunkKey{ino, idx, cur.ver}
	s.closeHandle(k)
	delete(s.sums, k)
	if err := os.Remove(s.chunkPath(k)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove chunk: %w", err)
	}
	s.stats.removed.Add(1)
	return nil
}

// punchFile zeroes [off, off+n) of a chunk file, freeing its blocks where
// the file system can.
func punchFile(fh *os.File, off, n uint64) error {
	err := unix.Fallocate(int(fh.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(off), int64(n))
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.EOPNOTSUPP) {
		return fmt.Errorf("punch a hole in a chunk: %w", err)
	}
	if _, err := fh.WriteAt(make([]byte, n), int64(off)); err != nil {
		return fmt.Errorf("zero a range of a chunk: %w", err)
	}
	return nil
}
