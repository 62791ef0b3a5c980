package fsm

// Checkpoint format (docs/journal-format.md, "Checkpoints"):
//
//	magic    8 bytes  "CFCKPT\x00\x01"
//	metaLen  uint32   big endian
//	meta     metaLen  gob-encoded state (namespace, attributes, sessions)
//	files    repeated: tag 0x01, ino uint64, size uint64, size bytes
//	end      tag 0x00
//	sum      32 bytes SHA-256 of every byte before it
//
// A checkpoint is staged in full and its checksum verified before anything
// of it is installed; a torn or corrupted checkpoint is refused and the
// installed state is left untouched.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

var checkpointMagic = [8]byte{'C', 'F', 'C', 'K', 'P', 'T', 0, 1}

const (
	tagEnd  = 0
	tagFile = 1
	maxMeta = 1 << 30
)

// ErrCapturePending reports that the host's checkpoint capture slots are all
// in use; raft retries the capture at its next interval.
var ErrCapturePending = errors.New("checkpoint capture pending: the host's concurrent capture limit is reached")

// ErrCheckpointCorrupt reports a checkpoint whose checksum or framing is wrong.
var ErrCheckpointCorrupt = errors.New("checkpoint corrupt")

type snapshot struct {
	f     *FSM
	dir   string
	meta  []byte
	files []uint64
	sizes map[uint64]uint64
	done  func()
	// sums, when set, are a linked checkpoint's file checksums, verified
	// as write streams the files (linked.go).
	sums map[uint64]uint32
	// linked is what persistLinked linked, recorded once the store closed
	// the checkpoint.
	linked map[uint64]linkedFile
	// inOrder are the checksums the apply kept of the bytes of files
	// written in order (seqsum.go), of the first bytes or all of them.
	inOrder map[uint64]seqPrefix
}

// Snapshot captures the state at the last applied entry: metadata and a
// hard link to every backing file (capture.go). Raft calls it between
// applies, so the capture is consistent; Persist streams it while applies
// continue. A failed state machine captures nothing: its state is not the
// group's.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.Failed(); err != nil {
		return nil, fmt.Errorf("no checkpoint of a failed state machine: %w", err)
	}
	if f.opt.Capture != nil {
		if !f.opt.Capture.TryAcquire() {
			return nil, ErrCapturePending
		}
	}
	release := func() {
		if f.opt.Capture != nil {
			f.opt.Capture.Release()
		}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	var meta bytes.Buffer
	if err := gob.NewEncoder(&meta).Encode(f.st); err != nil {
		release()
		return nil, fmt.Errorf("encode checkpoint metadata: %w", err)
	}
	dir := filepath.Join(f.opt.Dir, "captures", strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		release()
		return nil, fmt.Errorf("create capture directory: %w", err)
	}
	s := &snapshot{f: f, dir: dir, meta: meta.Bytes(), sizes: map[uint64]uint64{}, inOrder: map[uint64]seqPrefix{}}
	s.done = func() { os.RemoveAll(dir); release() }
	for ino, n := range f.st.Inodes {
		if n.Attr.IsRegular() {
			s.files = append(s.files, ino)
			s.sizes[ino] = n.Attr.Size
			if p := f.sums.prefix(ino, n.Attr.Size); p.n > 0 {
				s.inOrder[ino] = p
			}
		}
	}
	slices.Sort(s.files)
	for _, ino := range s.files {
		if err := captureFile(f.files.path(ino), filepath.Join(dir, strconv.FormatUint(ino, 16))); err != nil {
			s.done()
			return nil, fmt.Errorf("capture backing file of inode %d: %w", ino, err)
		}
	}
	return s, nil
}

// Persist writes the checkpoint to the snapshot store: linked (linked.go)
// when the store keeps files beside it, else streamed.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	// Until this checkpoint is closed, no checksum of an earlier one may
	// be reused: a failed checkpoint breaks the chain of links.
	prev := s.f.lastLinked()
	s.f.setLastLinked(nil)
	var n int64
	var err error
	linked := false
	if fs, ok := sink.(FilesSink); ok {
		n, linked, err = s.persistLinked(fs, prev)
	}
	if err == nil && !linked {
		n, err = s.write(sink)
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("persist checkpoint: %w", err)
	}
	if s.f.opt.OnCheckpoint != nil {
		if linked {
			// What the checkpoint holds: its manifest and the linked files.
			for _, ino := range s.files {
				n += int64(s.sizes[ino])
			}
		}
		s.f.opt.OnCheckpoint(n)
	}
	if err := sink.Close(); err != nil {
		return err
	}
	if linked {
		s.f.setLastLinked(s.linked)
	}
	return nil
}

func (s *snapshot) write(out io.Writer) (int64, error) {
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(out, h), 256<<10)
	cw := &countWriter{w: bw}
	var hdr [17]byte
	cw.Write(checkpointMagic[:])
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(s.meta)))
	cw.Write(hdr[:4])
	cw.Write(s.meta)
	for _, ino := range s.files {
		size := s.sizes[ino]
		hdr[0] = tagFile
		binary.BigEndian.PutUint64(hdr[1:9], ino)
		binary.BigEndian.PutUint64(hdr[9:17], size)
		cw.Write(hdr[:17])
		path := filepath.Join(s.dir, strconv.FormatUint(ino, 16))
		var err error
		if s.sums != nil {
			err = verifiedCopy(cw, path, size, s.sums[ino], ino)
		} else {
			err = copyExactly(cw, path, size)
		}
		if err != nil {
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

// copyExactly writes exactly size bytes of the file, zero-filling a sparse
// tail beyond the backing file's end.
func copyExactly(w io.Writer, path string, size uint64) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	return copySized(w, fh, size)
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
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

// Release drops the captured copy.
func (s *snapshot) Release() { s.done() }

// Restore stages a checkpoint, verifies its checksum and only then replaces
// the state and the backing tree.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	start := time.Now()
	defer func() {
		if f.opt.OnRestore != nil {
			f.opt.OnRestore(time.Since(start))
		}
	}()
	staging := filepath.Join(f.opt.Dir, "staging")
	if err := os.RemoveAll(staging); err != nil {
		return fmt.Errorf("clear staging: %w", err)
	}
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return fmt.Errorf("create staging: %w", err)
	}
	st, err := stage(rc, staging)
	if err != nil {
		os.RemoveAll(staging)
		return fmt.Errorf("restore checkpoint: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files.closeAll()
	old := filepath.Join(f.opt.Dir, "tree.old")
	if err := os.Rename(f.tree, old); err != nil {
		return fmt.Errorf("install checkpoint: %w", err)
	}
	if err := os.Rename(staging, f.tree); err != nil {
		return fmt.Errorf("install checkpoint: %w", err)
	}
	os.RemoveAll(old)
	f.setLastLinked(nil) // the tree's inodes are new
	f.sums.reset()
	st.rebuildNames()
	f.st = st
	f.setApplied(st.Applied)
	return nil
}

func stage(r io.Reader, dir string) (*state, error) {
	h := sha256.New()
	br := bufio.NewReaderSize(r, 256<<10)
	tr := io.TeeReader(br, h)
	var magic [8]byte
	if _, err := io.ReadFull(tr, magic[:]); err != nil || magic != checkpointMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrCheckpointCorrupt)
	}
	var hdr [17]byte
	if _, err := io.ReadFull(tr, hdr[:4]); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
	}
	metaLen := binary.BigEndian.Uint32(hdr[:4])
	if metaLen > maxMeta {
		return nil, fmt.Errorf("%w: metadata length %d", ErrCheckpointCorrupt, metaLen)
	}
	meta := make([]byte, metaLen)
	if _, err := io.ReadFull(tr, meta); err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrCheckpointCorrupt, err)
	}
	if err := stageFiles(tr, hdr[:], dir); err != nil {
		return nil, err
	}
	want := h.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil || !bytes.Equal(got, want) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCheckpointCorrupt)
	}
	st := &state{}
	if err := gob.NewDecoder(bytes.NewReader(meta)).Decode(st); err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrCheckpointCorrupt, err)
	}
	return st, nil
}

func stageFiles(tr io.Reader, hdr []byte, dir string) error {
	for {
		if _, err := io.ReadFull(tr, hdr[:1]); err != nil {
			return fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
		}
		if hdr[0] == tagEnd {
			return nil
		}
		if hdr[0] != tagFile {
			return fmt.Errorf("%w: unknown tag %d", ErrCheckpointCorrupt, hdr[0])
		}
		if _, err := io.ReadFull(tr, hdr[1:17]); err != nil {
			return fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
		}
		ino := binary.BigEndian.Uint64(hdr[1:9])
		size := binary.BigEndian.Uint64(hdr[9:17])
		if size > wire.MaxFileSize {
			return fmt.Errorf("%w: file size %d", ErrCheckpointCorrupt, size)
		}
		fh, err := os.Create(filepath.Join(dir, strconv.FormatUint(ino, 16)))
		if err != nil {
			return fmt.Errorf("stage inode %d: %w", ino, err)
		}
		_, err = io.CopyN(fh, tr, int64(size))
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%w: inode %d: %v", ErrCheckpointCorrupt, ino, err)
		}
	}
}

var _ raft.FSM = (*FSM)(nil)
