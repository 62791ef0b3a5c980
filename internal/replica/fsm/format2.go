package fsm

// Linked checkpoints (format 2, docs/journal-format.md, "Checkpoints"),
// read, never written since the chunk store (checkpoint.go). raft's state
// file held only a manifest, and the backing files it names were kept as
// hard links in a directory beside the checkpoint:
//
//	magic    8 bytes  "CFCKPT\x00\x02"
//	metaLen  uint32   big endian
//	meta     metaLen  gob-encoded state (as format 1)
//	files    repeated: tag 0x02, ino uint64, size uint64, CRC-32C of the
//	         file's size bytes (a sparse tail read as zeros), uint32
//	end      tag 0x00
//	sum      32 bytes SHA-256 of every byte before it
//
// Opening one (ExpandCheckpoint) yields the format 1 stream, built from the
// linked files, whose per-file checksums are verified while it is read, so
// a replica restores it, or sends it to a follower, like a format 1 stream.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

var linkedMagic = [8]byte{'C', 'F', 'C', 'K', 'P', 'T', 0, 2}

const tagLinked = 2

// linkedEntry is a manifest entry's size: tag, inode, size, CRC-32C.
const linkedEntry = 1 + 8 + 8 + 4

// castagnoli is a linked file's checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxLinkedFiles bounds the entries a manifest may name when it is parsed.
const maxLinkedFiles = 1 << 24

// ExpandCheckpoint turns a stored checkpoint state into the stream Restore
// reads. A linked checkpoint's manifest (format 2) is expanded from the
// files in dir into the format 1 stream of size bytes, each file checked
// against its checksum as it is read; linked is false when state is not a
// manifest (it is the stream itself; nothing of it was consumed).
func ExpandCheckpoint(state *bufio.Reader, dir string) (stream io.ReadCloser, size int64, linked bool, err error) {
	magic, err := state.Peek(len(linkedMagic))
	if err != nil || !bytes.Equal(magic, linkedMagic[:]) {
		return nil, 0, false, nil
	}
	s, err := readManifest(state)
	if err != nil {
		return nil, 0, true, err
	}
	s.dir = dir
	size = int64(len(streamMagic)) + 4 + int64(len(s.meta)) + 1 + sha256.Size
	for _, ino := range s.files {
		size += 17 + int64(s.sizes[ino])
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := s.write(pw)
		pw.CloseWithError(err)
	}()
	return pr, size, true, nil
}

func readManifest(r io.Reader) (*streamed, error) {
	h := sha256.New()
	tr := io.TeeReader(r, h)
	var hdr [linkedEntry]byte
	if _, err := io.ReadFull(tr, hdr[:12]); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCheckpointCorrupt, err)
	}
	metaLen := binary.BigEndian.Uint32(hdr[8:12])
	if metaLen > maxMeta {
		return nil, fmt.Errorf("%w: metadata length %d", ErrCheckpointCorrupt, metaLen)
	}
	s := &streamed{meta: make([]byte, metaLen), sizes: map[uint64]uint64{}, sums: map[uint64]uint32{}}
	if _, err := io.ReadFull(tr, s.meta); err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrCheckpointCorrupt, err)
	}
	for {
		if _, err := io.ReadFull(tr, hdr[:1]); err != nil {
			return nil, fmt.Errorf("%w: manifest: %v", ErrCheckpointCorrupt, err)
		}
		if hdr[0] == tagEnd {
			break
		}
		if hdr[0] != tagLinked || len(s.files) >= maxLinkedFiles {
			return nil, fmt.Errorf("%w: manifest entry tag %d after %d files", ErrCheckpointCorrupt, hdr[0], len(s.files))
		}
		if _, err := io.ReadFull(tr, hdr[1:]); err != nil {
			return nil, fmt.Errorf("%w: manifest: %v", ErrCheckpointCorrupt, err)
		}
		ino := binary.BigEndian.Uint64(hdr[1:9])
		size := binary.BigEndian.Uint64(hdr[9:17])
		if size > wire.MaxFileSize {
			return nil, fmt.Errorf("%w: file size %d", ErrCheckpointCorrupt, size)
		}
		if _, dup := s.sizes[ino]; dup {
			return nil, fmt.Errorf("%w: inode %d named twice", ErrCheckpointCorrupt, ino)
		}
		s.files = append(s.files, ino)
		s.sizes[ino] = size
		s.sums[ino] = binary.BigEndian.Uint32(hdr[17:21])
	}
	want := h.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, want) {
		return nil, fmt.Errorf("%w: manifest checksum mismatch", ErrCheckpointCorrupt)
	}
	return s, nil
}

// verifiedCopy writes exactly size bytes of the file at path (a sparse
// tail as zeros) and, for a linked file (sums set), checks them against its
// checksum before the stream goes on.
func verifiedCopy(w io.Writer, path string, size uint64, sums map[uint64]uint32, ino uint64) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: file of inode %d: %v", ErrCheckpointCorrupt, ino, err)
	}
	defer fh.Close()
	if sums == nil {
		return copySized(w, fh, size)
	}
	h := crc32.New(castagnoli)
	if err := copySized(io.MultiWriter(w, h), fh, size); err != nil {
		return err
	}
	if h.Sum32() != sums[ino] {
		return fmt.Errorf("%w: linked file of inode %d: checksum mismatch", ErrCheckpointCorrupt, ino)
	}
	return nil
}
