// Package directio writes file data around the page cache (O_DIRECT).
//
// Why: on the machines this project runs on (virtual machines whose memory
// the host backs lazily), the kernel's copy of a written byte into a new
// page-cache page was the largest single cost of a replica host, for data
// the host does not read back soon (the journal is served from memory).
// docs/performance.md ("Data-path optimisations: what each buys") has the
// same-run figures.
//
// An O_DIRECT write returns only when the device has the data. That suits
// writes an fdatasync follows anyway (the journal's appends); it does not
// suit writes the page cache would absorb and write back later: the apply's
// writes of the backing files, sent this way, made a catching-up follower's
// apply lag its journal on a busy disk and its memory grow past the stated
// bound (docs/performance.md, "tried and not kept").
//
// O_DIRECT wants offsets, lengths and buffers aligned to the device's
// logical block; Block (4 KiB) satisfies every common one. Callers write
// from their own (unaligned) buffers: WriteAt gathers them into pooled
// aligned chunks, so the cost is one copy into memory that stays warm.
// A filesystem that refuses O_DIRECT (tmpfs before Linux 6.6, some FUSE
// filesystems) makes Open fail; callers then write through the page cache
// as before.
//
// An O_DIRECT write is no more durable than a buffered one: fdatasync is
// still what makes it survive a power cut.
//
// directio must never import anything of this module: it is a leaf that
// every storage package may use.
package directio

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Block is the alignment of every offset, length and buffer of a write.
const Block = 4096

// chunk is the size of the aligned buffers a write goes through.
const chunk = 1 << 20

var chunks = sync.Pool{New: func() any { b := Aligned(chunk); return &b }}

// Aligned returns n zeroed bytes whose start is aligned to Block.
func Aligned(n int) []byte {
	b := make([]byte, n+Block)
	skip := (Block - int(uintptr(unsafe.Pointer(&b[0]))%Block)) % Block
	return b[skip : skip+n : skip+n]
}

// Open opens path for O_DIRECT writes (flag is ORed with O_WRONLY and
// O_DIRECT). An error means the filesystem refuses O_DIRECT or the file
// cannot be opened; either way the caller writes through the page cache.
func Open(path string, flag int) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|unix.O_DIRECT|flag, 0o600)
}

// RoundUp and RoundDown align off to Block.
func RoundUp(off int64) int64   { return (off + Block - 1) &^ (Block - 1) }
func RoundDown(off int64) int64 { return off &^ (Block - 1) }

// WriteAt writes the concatenation of parts at off (a multiple of Block)
// through f, opened by Open. When the parts do not end on a block boundary
// the last block is completed with zeros. keep, when not nil, receives the
// bytes of that last partial block (at most Block) and WriteAt returns how
// many it copied: the caller's next write that starts in the block needs
// them.
func WriteAt(f *os.File, off int64, keep []byte, parts ...[]byte) (int, error) {
	if off%Block != 0 {
		return 0, fmt.Errorf("direct write at offset %d: not a multiple of %d", off, Block)
	}
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	buf := *bp
	fill := 0
	for _, p := range parts {
		for len(p) > 0 {
			k := copy(buf[fill:], p)
			fill += k
			p = p[k:]
			if fill == len(buf) {
				if err := writeFull(f, buf, off); err != nil {
					return 0, err
				}
				off += int64(fill)
				fill = 0
			}
		}
	}
	if fill > 0 {
		padded := int(RoundUp(int64(fill)))
		clear(buf[fill:padded])
		if err := writeFull(f, buf[:padded], off); err != nil {
			return 0, err
		}
	}
	if keep == nil {
		return 0, nil
	}
	return copy(keep, buf[int(RoundDown(int64(fill))):fill]), nil
}

// writeFull writes b at off (os.File.WriteAt continues after short writes).
func writeFull(f *os.File, b []byte, off int64) error {
	if _, err := f.WriteAt(b, off); err != nil {
		return fmt.Errorf("direct write of %d bytes at %d: %w", len(b), off, err)
	}
	return nil
}
