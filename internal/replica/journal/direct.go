package journal

// Appends around the page cache (internal/directio says why).
//
// The tail segment has a second descriptor opened with O_DIRECT. An append
// is written from the block that holds the segment's end: that block's
// bytes already on disk are written again, unchanged (the page cache wrote
// back the whole page before, so a torn write of that block risks nothing it
// did not risk then), followed by the batch and zeros up to the next block
// boundary. The segment file is therefore up to one block longer than its
// frames; openSegment takes such zeros for padding, not for a torn tail, and
// the padding is cut off before a segment stops being the tail and at Close.
// fdatasync is unchanged.
//
// A filesystem that refuses O_DIRECT gets the buffered appends of
// pwriteAll; both write the same bytes at the same offsets.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cellfleet/cellfleet/internal/directio"
)

// directIO lets tests run the buffered appends on a filesystem that would
// take O_DIRECT.
var directIO = true

// openDirect gives s an O_DIRECT descriptor for appends, or leaves it
// buffered when the filesystem refuses one.
func (l *Log) openDirect(s *segment) {
	if !directIO || s.direct != nil {
		return
	}
	f, err := directio.Open(l.segPath(s.name), 0)
	if err != nil {
		return
	}
	s.direct = f
	s.block = directio.Aligned(directio.Block)
	s.blockEnd = -1
}

// settle makes s an ordinary segment file again: what follows its last
// frame (padding, or a recycled segment's earlier contents, recycle.go) is
// cut off and the O_DIRECT descriptor closed. The caller syncs.
func (s *segment) settle() error {
	if s.direct != nil {
		s.direct.Close()
		s.direct, s.block = nil, nil
	}
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("cut journal segment %d to its frames: %w", s.name.seq, err)
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
	start := directio.RoundDown(s.size)
	head := int(s.size - start)
	if head > 0 && s.blockEnd != s.size {
		// The last block's bytes were not written by this descriptor (the
		// segment was opened or truncated since): read them once.
		if _, err := s.f.ReadAt(s.block[:head], start); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read journal tail block: %w", err)
		}
	}
	parts := append([][]byte{s.block[:head]}, iov...)
	if _, err := directio.WriteAt(s.direct, start, s.block, parts...); err != nil {
		return err
	}
	// Valid only once s.size reaches it: an append whose fdatasync fails
	// leaves s.size where it was, and the next one reads the block again.
	s.blockEnd = s.size + int64(n)
	return nil
}

// isPadding reports whether the bytes of f from off to size are the zeros
// appendDirect leaves after a segment's last frame: fewer than a block, up
// to a block boundary.
func isPadding(f *os.File, off, size int64) (bool, error) {
	if size%directio.Block != 0 || size-off >= directio.Block || size <= off {
		return false, nil
	}
	b := make([]byte, size-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read journal segment end: %w", err)
	}
	return bytes.Count(b, []byte{0}) == len(b), nil
}
