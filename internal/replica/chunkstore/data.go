package chunkstore

// The live files: what the state machine's apply calls in place of its
// backing files (internal/replica/fsm/data.go). File sizes are the
// caller's replicated state; the store keeps only chunks, so a read is
// bounded by the caller and a truncate to a larger size changes nothing
// here (the new range is a hole).

import (
	"errors"
	"fmt"
	"os"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// checkRange refuses an inode number, offset or length no caller may pass.
func checkRange(ino, off uint64, n int) error {
	switch {
	case ino == 0:
		return errors.New("inode 0")
	case n < 0 || n > maxIO:
		return fmt.Errorf("length %d: want at most %d", n, maxIO)
	case off > wire.MaxFileSize || uint64(n) > wire.MaxFileSize-off:
		return fmt.Errorf("range %d+%d past the largest file (%d)", off, n, uint64(wire.MaxFileSize))
	}
	return nil
}

// WriteAt writes p at off of file ino.
func (s *Store) WriteAt(ino uint64, p []byte, off uint64) error {
	if err := checkRange(ino, off, len(p)); err != nil {
		return fmt.Errorf("write inode %d: %w", ino, err)
	}
	if len(p) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fm := s.mutableFile(ino)
	defer s.tidy(ino, fm)
	for len(p) > 0 {
		idx, o := off/s.chunkSize, off%s.chunkSize
		k := min(uint64(len(p)), s.chunkSize-o)
		if err := s.writePiece(fm, ino, idx, o, p[:k]); err != nil {
			return fmt.Errorf("write inode %d at %d: %w", ino, off, err)
		}
		p, off = p[k:], off+k
	}
	return nil
}

// writePiece writes d at o of one chunk. A sealed chunk's next version
// keeps only the bytes the write leaves: those before o when the write
// reaches the chunk's end, none when it also starts at 0.
func (s *Store) writePiece(fm *fileMap, ino, idx, o uint64, d []byte) error {
	cur := fm.get(idx)
	end := o + uint64(len(d))
	keep := cur.n
	if end >= uint64(cur.n) {
		keep = uint32(min(uint64(cur.n), o))
	}
	fh, ref, err := s.writable(ino, idx, cur, keep)
	if err != nil {
		return err
	}
	if _, err := fh.WriteAt(d, int64(o)); err != nil {
		return fmt.Errorf("write chunk %s: %w", s.chunkPath(chunkKey{ino, idx, ref.ver}), err)
	}
	ref.n = uint32(max(uint64(ref.n), end))
	fm.set(s.gen, idx, ref)
	return nil
}

// ReadAt fills p with file ino's bytes at off; holes and bytes past the
// chunks read as zeros. A sealed chunk that fails its checksum is an error
// wrapping ErrCorrupt.
func (s *Store) ReadAt(ino uint64, p []byte, off uint64) error {
	if err := checkRange(ino, off, len(p)); err != nil {
		return fmt.Errorf("read inode %d: %w", ino, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.readMap(s.files[ino], ino, p, off, s.sum)
}

// readMap reads p at off through fm (nil: every byte a hole). On an error
// p is cleared: no byte of a chunk that failed its check is left in it.
func (s *Store) readMap(fm *fileMap, ino uint64, p []byte, off uint64, sumOf func(chunkKey) *chunkSum) error {
	whole := p
	for len(p) > 0 {
		idx, o := off/s.chunkSize, off%s.chunkSize
		k := min(uint64(len(p)), s.chunkSize-o)
		var ref chunkRef
		if fm != nil {
			ref = fm.get(idx)
		}
		key := chunkKey{ino, idx, ref.ver}
		var sum *chunkSum
		if ref.ver != 0 {
			sum = sumOf(key)
		}
		if err := s.readChunkPiece(key, ref, sum, o, p[:k]); err != nil {
			clear(whole)
			return fmt.Errorf("read inode %d at %d: %w", ino, off, err)
		}
		p, off = p[k:], off+k
	}
	return nil
}

// sum returns a chunk's checksums; the lock is held.
func (s *Store) sum(k chunkKey) *chunkSum { return s.sums[k] }

// lockedSum is sum for a reader without the lock (a capture).
func (s *Store) lockedSum(k chunkKey) *chunkSum {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sums[k]
}

// Truncate drops file ino's chunks past size and cuts the one holding it.
func (s *Store) Truncate(ino, size uint64) error {
	if err := checkRange(ino, size, 0); err != nil {
		return fmt.Errorf("truncate inode %d: %w", ino, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files[ino] == nil {
		return nil
	}
	fm := s.mutableFile(ino)
	defer s.tidy(ino, fm)
	last, o := size/s.chunkSize, size%s.chunkSize
	for _, idx := range fm.from(last) {
		var err error
		if idx == last && o > 0 {
			err = s.trim(fm, ino, idx, uint32(o))
		} else {
			err = s.drop(fm, ino, idx, fm.get(idx))
		}
		if err != nil {
			return fmt.Errorf("truncate inode %d to %d: %w", ino, size, err)
		}
	}
	return nil
}

// trim cuts chunk idx to n bytes (n > 0).
func (s *Store) trim(fm *fileMap, ino, idx uint64, n uint32) error {
	cur := fm.get(idx)
	if cur.n <= n {
		return nil
	}
	fh, ref, err := s.writable(ino, idx, cur, n)
	if err != nil {
		return err
	}
	if err := fh.Truncate(int64(n)); err != nil {
		return fmt.Errorf("cut chunk: %w", err)
	}
	ref.n = n
	fm.set(s.gen, idx, ref)
	return nil
}

// Punch makes [off, off+n) of file ino read as zeros: chunks it covers
// whole become holes, a range reaching a chunk's end cuts it, and a range
// inside one is punched in its file. FALLOC_FL_ZERO_RANGE is the same
// here; what is allocated is the caller's replicated state (decision
// 0010, item 5).
func (s *Store) Punch(ino, off, n uint64) error {
	if err := checkRange(ino, off, 0); err != nil {
		return fmt.Errorf("punch inode %d: %w", ino, err)
	}
	if n > wire.MaxFileSize-off {
		return fmt.Errorf("punch inode %d: range %d+%d past the largest file", ino, off, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files[ino] == nil || n == 0 {
		return nil
	}
	fm := s.mutableFile(ino)
	defer s.tidy(ino, fm)
	end := off + n
	for _, idx := range fm.from(off / s.chunkSize) {
		start := idx * s.chunkSize
		if start >= end {
			break
		}
		a, b := max(off, start)-start, min(end, start+s.chunkSize)-start
		if err := s.punchPiece(fm, ino, idx, a, b); err != nil {
			return fmt.Errorf("punch inode %d at %d+%d: %w", ino, off, n, err)
		}
	}
	return nil
}

// punchPiece zeroes [a, b) of chunk idx.
func (s *Store) punchPiece(fm *fileMap, ino, idx, a, b uint64) error {
	cur := fm.get(idx)
	switch {
	case a >= uint64(cur.n):
		return nil
	case a == 0 && b >= uint64(cur.n):
		return s.drop(fm, ino, idx, cur)
	case b >= uint64(cur.n):
		return s.trim(fm, ino, idx, uint32(a))
	}
	fh, ref, err := s.writable(ino, idx, cur, cur.n)
	if err != nil {
		return err
	}
	if err := punchFile(fh, a, b-a); err != nil {
		return err
	}
	fm.set(s.gen, idx, ref)
	return nil
}

// Remove drops every chunk of file ino (an inode freed by the apply).
func (s *Store) Remove(ino uint64) error {
	if ino == 0 {
		return errors.New("remove inode 0")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fm := s.files[ino]
	if fm == nil {
		return nil
	}
	fm = s.mutableFile(ino)
	defer s.tidy(ino, fm)
	for _, idx := range fm.from(0) {
		if err := s.drop(fm, ino, idx, fm.get(idx)); err != nil {
			return fmt.Errorf("remove inode %d: %w", ino, err)
		}
	}
	return nil
}

// mutableFile returns ino's live map, made or cloned for this generation.
func (s *Store) mutableFile(ino uint64) *fileMap {
	fm := s.files[ino]
	if fm == nil {
		fm = newFileMap(s.gen)
	} else {
		fm = fm.mutable(s.gen)
	}
	s.files[ino] = fm
	return fm
}

// tidy forgets a file left with no chunks, and its directory when empty.
func (s *Store) tidy(ino uint64, fm *fileMap) {
	if fm.chunks > 0 {
		return
	}
	delete(s.files, ino)
	if os.Remove(s.inoDir(ino)) == nil {
		delete(s.dirs, ino)
	}
}
