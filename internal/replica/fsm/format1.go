package fsm

// Streamed checkpoints (format 1, docs/journal-format.md, "Checkpoints"):
//
//	magic    8 bytes  "CFCKPT\x00\x01"
//	metaLen  uint32   big endian
//	meta     metaLen  gob-encoded state (namespace, attributes, sessions)
//	files    repeated: tag 0x01, ino uint64, size uint64, size bytes
//	end      tag 0x00
//	sum      32 bytes SHA-256 of every byte before it
//
// Read, never written since the chunk store (checkpoint.go): a replica
// whose newest checkpoint is one of these (or a linked one, format2.go,
// which opens as this stream) restores it into the chunk store, and its
// next checkpoint is written in format 3. A stream is staged in full and
// its checksum verified before anything of it is installed.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

var streamMagic = [8]byte{'C', 'F', 'C', 'K', 'P', 'T', 0, 1}

const (
	tagEnd  = 0
	tagFile = 1
	maxMeta = 1 << 30
)

// streamed is a format 1 checkpoint's parts: its metadata and, per regular
// file, its size and the file holding its bytes in dir (a sparse tail reads
// as zeros). sums, when set, are the files' CRC-32C, checked as they are
// written (a linked checkpoint's, format2.go).
type streamed struct {
	meta  []byte
	dir   string
	files []uint64
	sizes map[uint64]uint64
	sums  map[uint64]uint32
}

// write writes the format 1 stream and returns its length.
func (s *streamed) write(out io.Writer) (int64, error) {
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(out, h), 256<<10)
	cw := &countWriter{w: bw}
	var hdr [17]byte
	cw.Write(streamMagic[:])
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(s.meta)))
	cw.Write(hdr[:4])
	cw.Write(s.meta)
	for _, ino := range s.files {
		size := s.sizes[ino]
		hdr[0] = tagFile
		binary.BigEndian.PutUint64(hdr[1:9], ino)
		binary.BigEndian.PutUint64(hdr[9:17], size)
		cw.Write(hdr[:17])
		if cw.err != nil {
			return cw.n, cw.err
		}
		if err := verifiedCopy(cw, filepath.Join(s.dir, strconv.FormatUint(ino, 16)), size, s.sums, ino); err != nil {
			return cw.n, err
		}
	}
	cw.Write([]byte{tagEnd})
	if cw.err != nil {
		return cw.n, cw.err
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	sum := h.Sum(nil)
	if _, err := out.Write(sum); err != nil {
		return cw.n, err
	}
	return cw.n + int64(len(sum)), nil
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// copySized writes exactly size bytes of r, zero-filling past its end.
func copySized(w io.Writer, r io.Reader, size uint64) error {
	k, err := io.Copy(w, io.LimitReader(r, int64(size)))
	if err != nil {
		return err
	}
	_, err = io.CopyN(w, zeroReader{}, int64(size)-k)
	return err
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	k, err := c.w.Write(p)
	c.n += int64(k)
	c.err = err
	return k, err
}

// restoreStream stages a format 1 stream, verifies it, and installs it:
// the chunk store emptied and each staged file written into it, its
// all-zero chunks left as holes.
func (f *FSM) restoreStream(r io.Reader) error {
	staging := filepath.Join(f.opt.Dir, "staging")
	if err := os.RemoveAll(staging); err != nil {
		return fmt.Errorf("clear staging: %w", err)
	}
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return fmt.Errorf("create staging: %w", err)
	}
	defer os.RemoveAll(staging)
	st, files, err := stage(r, staging)
	if err != nil {
		return fmt.Errorf("restore checkpoint: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.importFiles(staging, files); err != nil {
		// The store no longer holds the state the FSM does: stop, and
		// restart from the newest checkpoint and the journal.
		f.fail(err)
		return fmt.Errorf("restore checkpoint: %w", err)
	}
	f.install(st)
	return nil
}

// importFiles replaces the chunk store's live state with the staged files.
// The caller holds the write lock.
func (f *FSM) importFiles(dir string, files []uint64) error {
	if err := f.store.Reset(); err != nil {
		f.log.Warn("collecting the chunk store's unreferenced chunks failed", "error", err)
	}
	buf := make([]byte, f.store.ChunkSize())
	for _, ino := range files {
		if err := f.importFile(filepath.Join(dir, strconv.FormatUint(ino, 16)), ino, buf); err != nil {
			return err
		}
	}
	return nil
}

func (f *FSM) importFile(path string, ino uint64, buf []byte) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("import inode %d: %w", ino, err)
	}
	defer fh.Close()
	for off := uint64(0); ; off += uint64(len(buf)) {
		k, err := io.ReadFull(fh, buf)
		if k > 0 && !allZero(buf[:k]) {
			if werr := f.store.WriteAt(ino, buf[:k], off); werr != nil {
				return fmt.Errorf("import inode %d: %w", ino, werr)
			}
		}
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return nil
		default:
			return fmt.Errorf("import inode %d: %w", ino, err)
		}
	}
}

func allZero(p []byte) bool {
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
}

// stage reads a format 1 stream into dir, one file per regular inode, and
// returns its state and the inodes staged once the checksum matched.
func stage(r io.Reader, dir string) (*state, []uint64, error) {
	h := sha256.New()
	br := bufio.NewReaderSize(r, 256<<10)
	tr := io.TeeReader(br, h)
	var magic [8]byte
	if _, err := io.ReadFull(tr, magic[:]); err != nil || magic != streamMagic {
		return nil, nil, fmt.Errorf("%w: bad magic", ErrCheckpointCorrupt)
	}
	var hdr [17]byte
	if _, err := io.ReadFull(tr, hdr[:4]); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
	}
	metaLen := binary.BigEndian.Uint32(hdr[:4])
	if metaLen > maxMeta {
		return nil, nil, fmt.Errorf("%w: metadata length %d", ErrCheckpointCorrupt, metaLen)
	}
	meta := make([]byte, metaLen)
	if _, err := io.ReadFull(tr, meta); err != nil {
		return nil, nil, fmt.Errorf("%w: metadata: %v", ErrCheckpointCorrupt, err)
	}
	files, err := stageFiles(tr, hdr[:], dir)
	if err != nil {
		return nil, nil, err
	}
	want := h.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil || !bytes.Equal(got, want) {
		return nil, nil, fmt.Errorf("%w: checksum mismatch", ErrCheckpointCorrupt)
	}
	st, err := decodeState(meta)
	return st, files, err
}

func decodeState(meta []byte) (*state, error) {
	st := &state{}
	if err := gob.NewDecoder(bytes.NewReader(meta)).Decode(st); err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrCheckpointCorrupt, err)
	}
	return st, nil
}

func stageFiles(tr io.Reader, hdr []byte, dir string) ([]uint64, error) {
	var files []uint64
	for {
		if _, err := io.ReadFull(tr, hdr[:1]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
		}
		if hdr[0] == tagEnd {
			return files, nil
		}
		if hdr[0] != tagFile {
			return nil, fmt.Errorf("%w: unknown tag %d", ErrCheckpointCorrupt, hdr[0])
		}
		if _, err := io.ReadFull(tr, hdr[1:17]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
		}
		ino := binary.BigEndian.Uint64(hdr[1:9])
		size := binary.BigEndian.Uint64(hdr[9:17])
		if size > wire.MaxFileSize {
			return nil, fmt.Errorf("%w: file size %d", ErrCheckpointCorrupt, size)
		}
		fh, err := os.Create(filepath.Join(dir, strconv.FormatUint(ino, 16)))
		if err != nil {
			return nil, fmt.Errorf("stage inode %d: %w", ino, err)
		}
		_, err = io.CopyN(fh, tr, int64(size))
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%w: inode %d: %v", ErrCheckpointCorrupt, ino, err)
		}
		files = append(files, ino)
	}
}
