package journal

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// DefaultSegmentSize is the journal segment size.
const DefaultSegmentSize = 16 << 20

// OpenJournal opens (or creates) the journal in dir/journal, truncating a
// torn tail (docs/journal-format.md).
func OpenJournal(dir string, segmentSize int64, log *slog.Logger) (*Log, error) {
	if segmentSize <= 0 {
		segmentSize = DefaultSegmentSize
	}
	l, torn, err := OpenLog(filepath.Join(dir, JournalDir), segmentSize)
	if err != nil {
		return nil, err
	}
	if torn > 0 {
		// After a crash the count includes what a reused or zero-filled
		// tail segment held past its last batch (journal-format.md,
		// "Recycled segments"), not only a torn batch.
		log.Warn("torn journal tail truncated on recovery", "bytes", torn)
	}
	return l, nil
}

// Outbound gates checkpoint transfers this replica sends to a peer being
// rebuilt: Begin returns false when the host's outbound rebuild slots are
// all taken, otherwise a reader wrapper charging the host's shared rate
// limit and a release function.
type Outbound interface {
	Begin() (wrap func(io.Reader) io.Reader, release func(), ok bool)
}

// CheckpointStore is raft's file snapshot store (CRC64 verified on open)
// with outbound transfers bounded by the host.
type CheckpointStore struct {
	*raft.FileSnapshotStore
	dir      string // dir/checkpoints; raft keeps each under snapshots/
	outbound Outbound
	sending  func() bool // true when an Open serves a transfer to a peer
	expand   Expander    // nil: states are opened as stored
	logger   hclog.Logger
}

// OpenCheckpoints opens dir/checkpoints, keeping retain checkpoints.
// sending tells an Open for a peer transfer (the replica leads) from one for
// a local restore; expand opens linked checkpoints (linkedfiles.go).
func OpenCheckpoints(dir string, retain int, logger hclog.Logger, outbound Outbound, sending func() bool, expand Expander) (*CheckpointStore, error) {
	fs, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, CheckpointDir), retain, logger)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	// raft creates checkpoints/snapshots without fsyncing either parent:
	// make both entries durable before any checkpoint is relied on.
	for _, d := range []string{filepath.Join(dir, CheckpointDir), dir} {
		if err := durable.SyncDir(d); err != nil {
			return nil, fmt.Errorf("open checkpoint store: %w", err)
		}
	}
	s := &CheckpointStore{FileSnapshotStore: fs, dir: filepath.Join(dir, CheckpointDir), outbound: outbound, sending: sending,
		expand: expand, logger: logger}
	if err := s.reapFiles(false); err != nil {
		return nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	return s, nil
}

// Create starts a checkpoint whose Close also makes the checkpoint
// directory's own entries durable. raft's sink fsyncs state.bin, meta.json
// and the parent after its rename, but never the checkpoint directory: a
// power cut could leave it empty while raft compacts the journal behind it
// once Close returns. Until the directory fsync returns, the previous
// checkpoint and the uncompacted journal still stand (an empty directory is
// skipped on open).
func (s *CheckpointStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &durableSink{SnapshotSink: sink, dir: filepath.Join(s.dir, raftSnapshotsDir), files: s.filesDir(sink.ID()), store: s}, nil
}

// raftSnapshotsDir is where raft's FileSnapshotStore keeps its checkpoints
// under the directory it is given (its unexported snapPath).
const raftSnapshotsDir = "snapshots"

type durableSink struct {
	raft.SnapshotSink
	dir   string
	files string // linked files' directory (linkedfiles.go)
	store *CheckpointStore
}

func (d *durableSink) Close() error {
	if err := d.SnapshotSink.Close(); err != nil {
		return err
	}
	if err := durable.SyncDir(filepath.Join(d.dir, d.ID())); err != nil {
		return fmt.Errorf("checkpoint %s: %w", d.ID(), err)
	}
	// raft reaped the checkpoints beyond its retention in Close; their
	// links go now. A failure leaves links that only cost copies at later
	// writes (copy-on-write) until the next reap: not a checkpoint failure.
	if err := d.store.reapFiles(true); err != nil {
		d.store.logger.Warn("removing reaped checkpoints' files failed", "error", err)
	}
	return nil
}

// ErrRebuildPending reports that the host's outbound rebuild limit is
// reached; raft retries the transfer.
var ErrRebuildPending = fmt.Errorf("outbound rebuild pending: the host's concurrent rebuild limit is reached")

// Open opens a checkpoint; transfers to peers are admitted and throttled.
func (s *CheckpointStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if s.outbound == nil || s.sending == nil || !s.sending() {
		meta, rc, _, err := s.openState(id)
		return meta, rc, err
	}
	wrap, release, ok := s.outbound.Begin()
	if !ok {
		return nil, nil, ErrRebuildPending
	}
	meta, rc, _, err := s.openState(id)
	if err != nil {
		release()
		return nil, nil, err
	}
	return meta, &throttled{Reader: wrap(rc), c: rc, release: release}, nil
}

// LatestIndex returns the index of the newest checkpoint, or 0.
func (s *CheckpointStore) LatestIndex() uint64 {
	list, err := s.List()
	if err != nil || len(list) == 0 {
		return 0
	}
	return list[0].Index
}

type throttled struct {
	io.Reader
	c       io.Closer
	release func()
	done    bool
}

func (t *throttled) Close() error {
	if !t.done {
		t.done = true
		t.release()
	}
	return t.c.Close()
}

// ErrCheckpointUnusable reports a checkpoint whose metadata or state fails
// to read or verify.
var ErrCheckpointUnusable = errors.New("checkpoint unusable")

// Usable verifies the checkpoints newest first, the way raft will restore
// them, and returns the index of the newest one that verifies (0: none).
//
// raft skips a checkpoint that fails to open and restores an older one,
// then replays the journal after it. When the journal no longer starts
// right after that older checkpoint (compaction dropped those entries),
// raft panics on the missing entry and takes the whole host process, with
// every other worker, down. That replica has lost its authority: Usable
// returns a LostError instead. firstLog is the journal's first index.
func (s *CheckpointStore) Usable(id Identity, firstLog uint64) (uint64, error) {
	names, err := s.onDisk()
	if err != nil {
		return 0, err
	}
	var bad []string
	for _, n := range names {
		if err := s.verify(n.id); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", n.id, err))
			continue
		}
		if len(bad) > 0 && (firstLog == 0 || firstLog > n.index+1) {
			return 0, &LostError{Volume: id.Volume, Replica: id.Replica, Reason: fmt.Sprintf(
				"newest checkpoint corrupt (%s) and the journal (first index %d) does not follow the older checkpoint at %d",
				strings.Join(bad, "; "), firstLog, n.index)}
		}
		return n.index, nil
	}
	if len(bad) > 0 && firstLog != 1 {
		return 0, &LostError{Volume: id.Volume, Replica: id.Replica, Reason: fmt.Sprintf(
			"every checkpoint corrupt (%s) and the journal starts at index %d, not 1", strings.Join(bad, "; "), firstLog)}
	}
	return 0, nil
}

type checkpointName struct {
	id                string
	term, index, msec uint64
}

// onDisk lists the checkpoint directories by name, newest first (raft's
// order: term, index, then creation), including those whose metadata no
// longer parses, which raft's List silently leaves out.
func (s *CheckpointStore) onDisk() ([]checkpointName, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, raftSnapshotsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var out []checkpointName
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		var n checkpointName
		if _, err := fmt.Sscanf(e.Name(), "%d-%d-%d", &n.term, &n.index, &n.msec); err != nil {
			return nil, fmt.Errorf("%w: stray checkpoint directory %s", ErrCheckpointUnusable, e.Name())
		}
		n.id = e.Name()
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b checkpointName) int {
		return cmp.Or(cmp.Compare(b.term, a.term), cmp.Compare(b.index, a.index), cmp.Compare(b.msec, a.msec))
	})
	return out, nil
}

// verify opens a checkpoint through raft's store, which checks the
// metadata and the state's CRC-64; a linked checkpoint's files are read
// against their checksums too.
func (s *CheckpointStore) verify(id string) error {
	meta, rc, linked, err := s.openState(id)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCheckpointUnusable, err)
	}
	if linked {
		_, err = io.Copy(io.Discard, rc)
	}
	rc.Close()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCheckpointUnusable, err)
	}
	if meta.ID != id {
		return fmt.Errorf("%w: metadata names %s", ErrCheckpointUnusable, meta.ID)
	}
	return nil
}
