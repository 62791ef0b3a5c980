package chunkstore

// Checksums and verified reads (decision 0010, items 3 and 7).
//
// A persisted or installed chunk has a SHA-256 (its identity in a manifest
// and in a rebuild) and a CRC-32C per BlockSize bytes (what a read checks:
// a 4 KiB read checks one 64 KiB block, not the whole chunk). A mismatch is
// an error wrapping ErrCorrupt and the bytes are never returned. A chunk
// made since the last persist has no checksums yet, and its reads are not
// verified: nothing recorded what it should hold.

import (
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// castagnoli is CRC-32C, as the journal and the linked checkpoints use
// (internal/replica/fsm/linked.go says why not SHA-256 per block).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkSum is what a manifest records of one chunk. Immutable once made.
type chunkSum struct {
	n    uint32
	sha  [sha256.Size]byte
	crcs []uint32
}

func blocks(n uint32) int { return int((uint64(n) + BlockSize - 1) / BlockSize) }

func sumOf(data []byte) *chunkSum {
	c := &chunkSum{n: uint32(len(data)), sha: sha256.Sum256(data), crcs: make([]uint32, 0, blocks(uint32(len(data))))}
	for off := 0; off < len(data); off += BlockSize {
		c.crcs = append(c.crcs, crc32.Checksum(data[off:min(off+BlockSize, len(data))], castagnoli))
	}
	return c
}

func (c *chunkSum) equal(o *chunkSum) bool {
	if c.n != o.n || c.sha != o.sha || len(c.crcs) != len(o.crcs) {
		return false
	}
	for i := range c.crcs {
		if c.crcs[i] != o.crcs[i] {
			return false
		}
	}
	return true
}

func (s *Store) getBuf() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, s.chunkSize)
	return &b
}

func (s *Store) putBuf(b *[]byte) { s.bufs.Put(b) }

// readBlocks reads data, the chunk's bytes from the block boundary from to
// a block boundary or the chunk's end, and checks each block's CRC-32C.
func (s *Store) readBlocks(f *os.File, k chunkKey, sum *chunkSum, from uint64, data []byte) error {
	if _, err := f.ReadAt(data, int64(from)); err != nil {
		if err == io.EOF {
			return fmt.Errorf("%w: chunk %s is shorter than its %d recorded bytes", ErrCorrupt, s.chunkPath(k), sum.n)
		}
		return fmt.Errorf("read chunk %s: %w", s.chunkPath(k), err)
	}
	for off := 0; off < len(data); off += BlockSize {
		b := from/BlockSize + uint64(off/BlockSize)
		if crc32.Checksum(data[off:min(off+BlockSize, len(data))], castagnoli) != sum.crcs[b] {
			return fmt.Errorf("%w: chunk %s, block at %d fails its CRC-32C", ErrCorrupt, s.chunkPath(k), b*BlockSize)
		}
	}
	return nil
}

// readVerified fills d with the chunk's bytes at o (within its length),
// checking the blocks they lie in. Block-aligned reads go straight into d.
func (s *Store) readVerified(f *os.File, k chunkKey, sum *chunkSum, o uint64, d []byte) error {
	end := o + uint64(len(d))
	from := o / BlockSize * BlockSize
	to := min((end+BlockSize-1)/BlockSize*BlockSize, uint64(sum.n))
	if from == o && to == end {
		return s.readBlocks(f, k, sum, from, d)
	}
	buf := s.getBuf()
	defer s.putBuf(buf)
	span := (*buf)[:to-from]
	if err := s.readBlocks(f, k, sum, from, span); err != nil {
		return err
	}
	copy(d, span[o-from:])
	return nil
}

// verifyPrefix checks the blocks holding a chunk's first n bytes and, with
// dst, copies those bytes into it.
func (s *Store) verifyPrefix(f *os.File, k chunkKey, sum *chunkSum, n uint32, dst *os.File) error {
	buf := s.getBuf()
	defer s.putBuf(buf)
	to := min((uint64(n)+BlockSize-1)/BlockSize*BlockSize, uint64(sum.n))
	span := (*buf)[:to]
	if err := s.readBlocks(f, k, sum, 0, span); err != nil {
		return err
	}
	if dst == nil {
		return nil
	}
	if _, err := dst.WriteAt(span[:n], 0); err != nil {
		return fmt.Errorf("copy-on-write: %w", err)
	}
	return nil
}

// readChunkPiece fills d with chunk ref's bytes at o: zeros past its
// length, verified when sum is known. The chunk is live under the read
// lock, or held by a capture.
func (s *Store) readChunkPiece(k chunkKey, ref chunkRef, sum *chunkSum, o uint64, d []byte) error {
	if ref.ver == 0 || o >= uint64(ref.n) {
		clear(d)
		return nil
	}
	avail := min(uint64(len(d)), uint64(ref.n)-o)
	clear(d[avail:])
	f, err := os.Open(s.chunkPath(k))
	if err != nil {
		return fmt.Errorf("open chunk: %w", err)
	}
	defer f.Close()
	if sum != nil {
		if sum.n != ref.n {
			return fmt.Errorf("%w: chunk %s: %d bytes recorded, checksums of %d", ErrCorrupt, s.chunkPath(k), ref.n, sum.n)
		}
		return s.readVerified(f, k, sum, o, d[:avail])
	}
	if _, err := f.ReadAt(d[:avail], int64(o)); err != nil {
		if err == io.EOF {
			return fmt.Errorf("%w: chunk %s is shorter than its %d bytes", ErrCorrupt, s.chunkPath(k), ref.n)
		}
		return fmt.Errorf("read chunk %s: %w", s.chunkPath(k), err)
	}
	return nil
}

// sumFile fdatasyncs a chunk file of n bytes and checksums it.
func (s *Store) sumFile(k chunkKey, n uint32) (*chunkSum, error) {
	path := s.chunkPath(k)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open chunk: %w", err)
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return nil, fmt.Errorf("fdatasync chunk %s: %w", path, err)
	}
	s.stats.synced.Add(1)
	buf := s.getBuf()
	defer s.putBuf(buf)
	data := (*buf)[:n]
	if got, err := f.ReadAt(data, 0); err != nil {
		return nil, fmt.Errorf("%w: chunk %s holds %d bytes, not %d", ErrCorrupt, path, got, n)
	}
	s.stats.hashed.Add(1)
	return sumOf(data), nil
}
