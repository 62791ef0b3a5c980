package fsm

// Checkpoints (docs/journal-format.md, "Checkpoints"; docs/decisions/
// 0010-chunked-store.md). A checkpoint is written in format 3: the
// metadata and the chunk store's manifest, which names the chunks that hold
// the files' bytes (they stay in the store, <dataDir>/store):
//
//	magic    8 bytes  "CFCKPT\x00\x03"
//	metaLen  uint32   big endian
//	meta     metaLen  gob-encoded state (namespace, attributes, sessions)
//	manLen   uint32   big endian
//	manifest manLen   chunkstore.Manifest.Encode
//	sum      32 bytes SHA-256 of every byte before it
//
// A capture records the live chunk maps under the read lock (no system
// call per chunk); Persist fdatasyncs and checksums only the chunks made
// since the previous checkpoint. Restoring a checkpoint this replica wrote
// copies nothing (the store keeps its manifest); one received from another
// replica installs only the chunks this store lacks (restore.go). Formats 1
// and 2 are read only (format1.go, format2.go).

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/chunkstore"
)

var chunkedMagic = [8]byte{'C', 'F', 'C', 'K', 'P', 'T', 0, 3}

// maxManifest bounds a format 3 manifest when it is read: about 124 bytes
// per chunk, so 1 GiB names 8 TiB of 1 MiB chunks.
const maxManifest = 1 << 30

// ErrCapturePending reports that the host's checkpoint capture slots are all
// in use; raft retries the capture at its next interval.
var ErrCapturePending = errors.New("checkpoint capture pending: the host's concurrent capture limit is reached")

// ErrCheckpointCorrupt reports a checkpoint whose checksum or framing is wrong.
var ErrCheckpointCorrupt = errors.New("checkpoint corrupt")

type snapshot struct {
	f         *FSM
	meta      []byte
	capture   *chunkstore.Capture
	release   func()
	persisted bool
	once      sync.Once
}

// Snapshot captures the state at the last applied entry: the metadata and
// the chunk store's live maps. Raft calls it between applies, so the
// capture is consistent; Persist writes it while applies continue. A
// failed state machine captures nothing: its state is not the group's.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.Failed(); err != nil {
		return nil, fmt.Errorf("no checkpoint of a failed state machine: %w", err)
	}
	release := func() {}
	if f.opt.Capture != nil {
		if !f.opt.Capture.TryAcquire() {
			return nil, ErrCapturePending
		}
		release = f.opt.Capture.Release
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	var meta bytes.Buffer
	if err := gob.NewEncoder(&meta).Encode(f.st); err != nil {
		release()
		return nil, fmt.Errorf("encode checkpoint metadata: %w", err)
	}
	return &snapshot{f: f, meta: meta.Bytes(), capture: f.store.Capture(f.st.Applied), release: release}, nil
}

// Persist makes the capture a kept manifest of the chunk store, then
// writes the checkpoint naming it. If the checkpoint is not kept, neither
// is the manifest.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	m, err := s.f.store.Persist(s.capture)
	if errors.Is(err, chunkstore.ErrCollect) && m != nil {
		s.f.log.Warn("collecting the chunk store's unreferenced chunks failed", "error", err)
		err = nil
	}
	if err == nil && m == nil {
		err = errors.New("the chunk store kept no manifest")
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("persist checkpoint: %w", err)
	}
	s.persisted = true
	n, err := writeChunked(sink, s.meta, m)
	if err != nil {
		sink.Cancel()
		s.f.dropManifest(m.ID)
		return fmt.Errorf("persist checkpoint: %w", err)
	}
	if err := sink.Close(); err != nil {
		s.f.dropManifest(m.ID)
		return err
	}
	if s.f.opt.OnCheckpoint != nil {
		// What the checkpoint holds: its state file and the chunks named.
		for _, e := range m.Entries {
			n += int64(e.Len)
		}
		s.f.opt.OnCheckpoint(n)
	}
	return nil
}

// Release drops the capture; chunks only it held are collected.
func (s *snapshot) Release() {
	s.once.Do(func() {
		s.capture.Release()
		s.release()
		if !s.persisted {
			if err := s.f.store.Collect(); err != nil {
				s.f.log.Warn("collecting the chunk store's unreferenced chunks failed", "error", err)
			}
		}
	})
}

func (f *FSM) dropManifest(id uint64) {
	if err := f.store.DropManifest(id); err != nil {
		f.log.Warn("dropping the manifest of a checkpoint that was not kept failed", "manifest", id, "error", err)
	}
}

// writeChunked writes a format 3 checkpoint and returns its length.
func writeChunked(out io.Writer, meta []byte, m *chunkstore.Manifest) (int64, error) {
	man := m.Encode()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(out, h)}
	var n [4]byte
	cw.Write(chunkedMagic[:])
	binary.BigEndian.PutUint32(n[:], uint32(len(meta)))
	cw.Write(n[:])
	cw.Write(meta)
	binary.BigEndian.PutUint32(n[:], uint32(len(man)))
	cw.Write(n[:])
	cw.Write(man)
	if cw.err != nil {
		return cw.n, cw.err
	}
	k, err := out.Write(h.Sum(nil))
	return cw.n + int64(k), err
}

// readChunked reads a format 3 checkpoint, its checksum verified.
func readChunked(r io.Reader) (*state, *chunkstore.Manifest, error) {
	h := sha256.New()
	tr := io.TeeReader(r, h)
	var hdr [12]byte
	if _, err := io.ReadFull(tr, hdr[:12]); err != nil || !bytes.Equal(hdr[:8], chunkedMagic[:]) {
		return nil, nil, fmt.Errorf("%w: bad header", ErrCheckpointCorrupt)
	}
	meta, err := readSized(tr, binary.BigEndian.Uint32(hdr[8:12]), maxMeta, "metadata")
	if err != nil {
		return nil, nil, err
	}
	if _, err := io.ReadFull(tr, hdr[:4]); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
	}
	man, err := readSized(tr, binary.BigEndian.Uint32(hdr[:4]), maxManifest, "manifest")
	if err != nil {
		return nil, nil, err
	}
	want := h.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, want) {
		return nil, nil, fmt.Errorf("%w: checksum mismatch", ErrCheckpointCorrupt)
	}
	m, err := chunkstore.DecodeManifest(bytes.NewReader(man))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCheckpointCorrupt, err)
	}
	st, err := decodeState(meta)
	return st, m, err
}

func readSized(r io.Reader, n, limit uint32, what string) ([]byte, error) {
	if n > limit {
		return nil, fmt.Errorf("%w: %s length %d", ErrCheckpointCorrupt, what, n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCheckpointCorrupt, what, err)
	}
	return p, nil
}

// Restore installs a checkpoint: format 3 (restore.go), or the format 1
// stream (format1.go, also what a format 2 checkpoint opens as). A torn or
// corrupted checkpoint is refused before anything of it is installed.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	start := time.Now()
	defer func() {
		if f.opt.OnRestore != nil {
			f.opt.OnRestore(time.Since(start))
		}
	}()
	br := bufio.NewReaderSize(rc, 256<<10)
	magic, err := br.Peek(len(chunkedMagic))
	if err != nil {
		return fmt.Errorf("restore checkpoint: %w: %v", ErrCheckpointCorrupt, err)
	}
	if bytes.Equal(magic, chunkedMagic[:]) {
		return f.restoreChunked(br)
	}
	return f.restoreStream(br)
}

// install makes st the state; the caller holds the write lock and has
// made the chunk store's live state st's.
func (f *FSM) install(st *state) {
	st.rebuildNames()
	f.st = st
	f.setApplied(st.Applied)
}

var _ raft.FSM = (*FSM)(nil)
