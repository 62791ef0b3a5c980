package journal

// Appends around the page cache (O_DIRECT).
//
// Why: on the machines this project runs on, the kernel's copy of every
// appended byte into new page-cache pages was the largest single cost of a
// replica host (docs/performance.md, "The whole mount path, profiled per
// process"), and the journal's bytes are almost never read back through the
// page cache: raft's replicators and the applies are served from the memory
// cache (cache.go), and the files are read only on a cache miss and at open.
//
// How: the tail segment has a second descriptor opened with O_DIRECT. An
// append is written in block-aligned chunks from aligned buffers, starting at
// the block that holds the segment's end: that block's bytes already on disk
// are written again, unchanged (the page cache wrote back the whole page
// before, so a torn write of that block risks nothing it did not risk then),
// followed by the batch and zeros up to the next block boundary. The segment
// file is therefore up to one block longer than its frames; openSegment takes
// such zeros for padding, not for a torn tail, and the padding is cut off
// before a segment stops being the tail and at Close. fdatasync is unchanged:
// an O_DIRECT write is not durable until it returns.
//
// A filesystem that refuses O_DIRECT (tmpfs, some FUSE filesystems) gets the
// buffered appends of pwriteAll; both write the same bytes at the same
// offsets.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directBlock is the alignment of O_DIRECT offsets, lengths and buffers:
// 4 KiB satisfies every logical block size up to it.
const directBlock = 4096

// directChunk is the size of the aligned buffers a batch is written through.
const directChunk = 1 << 20

// directIO lets tests run the buffered appends on a filesystem that would
// take O_DIRECT.
var directIO = true

var directChunks = sync.Pool{New: func() any { b := alignedBlock(directChunk); return &b }}

// alignedBlock returns n bytes whose start is aligned to directBlock.
func alignedBlock(n int) []byte {
	b := make([]byte, n+directBlock)
	skip := (directBlock - int(uintptr(unsafe.Pointer(&b[0]))%directBlock)) % directBlock
	return b[skip : skip+n : skip+n]
}

// openDirect gives s an O_DIRECT descriptor for appends, or leaves it
// buffered when the filesystem refuses one.
func (l *Log) openDirect(s *segment) {
	if !directIO || s.direct != nil {
		return
	}
	f, err := os.OpenFile(l.segPath(s.seq), os.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		return
	}
	s.direct = f
	s.block = alignedBlock(directBlock)
	s.blockEnd = -1
}

// settle makes s an ordinary segment file again: the padding after its last
// frame is cut off and the O_DIRECT descriptor closed. The caller syncs.
func (s *segment) settle() error {
	if s.direct == nil {
		return nil
	}
	err := s.f.Truncate(s.size)
	s.direct.Close()
	s.direct, s.block = nil, nil
	if err != nil {
		return fmt.Errorf("cut journal segment %d to its frames: %w", s.seq, err)
	}
	return nil
}

// close closes both of s's descriptors.
func (s *segment) close() {
	if s.direct != nil {
		s.direct.Close()
		s.direct = nil
	}
	s.f.Close()
}

// appendDirect writes the n bytes of iov at s.size through s.direct.
func (s *segment) appendDirect(iov [][]byte, n int) error {
	start := s.size &^ (directBlock - 1)
	head := int(s.size - start)
	if head > 0 && s.blockEnd != s.size {
		// The last block's bytes were not written by this descriptor (the
		// segment was opened or truncated since): read them once.
		if _, err := s.f.ReadAt(s.block[:head], start); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read journal tail block: %w", err)
		}
	}
	bp := directChunks.Get().(*[]byte)
	defer directChunks.Put(bp)
	chunk := *bp
	fill := copy(chunk, s.block[:head])
	off := start
	for _, b := range iov {
		for len(b) > 0 {
			k := copy(chunk[fill:], b)
			fill += k
			b = b[k:]
			if fill == len(chunk) {
				if err := pwriteFull(s.direct, chunk, off); err != nil {
					return err
				}
				off += int64(fill)
				fill = 0
			}
		}
	}
	if fill > 0 {
		padded := (fill + directBlock - 1) &^ (directBlock - 1)
		clear(chunk[fill:padded])
		if err := pwriteFull(s.direct, chunk[:padded], off); err != nil {
			return err
		}
	}
	last := fill &^ (directBlock - 1)
	copy(s.block, chunk[last:fill])
	s.blockEnd = s.size + int64(n)
	return nil
}

// pwriteFull writes b at off, continuing after short writes.
func pwriteFull(f *os.File, b []byte, off int64) error {
	return pwriteAll(f, [][]byte{b}, off)
}

// isPadding reports whether the bytes of f from off to size are the zeros
// appendDirect leaves after a segment's last frame: fewer than a block, up
// to a block boundary.
func isPadding(f *os.File, off, size int64) (bool, error) {
	if size%directBlock != 0 || size-off >= directBlock || size <= off {
		return false, nil
	}
	b := make([]byte, size-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read journal segment end: %w", err)
	}
	return bytes.Count(b, []byte{0}) == len(b), nil
}
