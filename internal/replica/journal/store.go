package journal

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
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
	dir      string
	outbound Outbound
	sending  func() bool // true when an Open serves a transfer to a peer
}

// OpenCheckpoints opens dir/checkpoints, keeping retain checkpoints.
// sending tells an Open for a peer transfer (the replica leads) from one for
// a local restore.
func OpenCheckpoints(dir string, retain int, logger hclog.Logger, outbound Outbound, sending func() bool) (*CheckpointStore, error) {
	fs, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, CheckpointDir), retain, logger)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	// raft creates checkpoints/snapshots without fsyncing either parent:
	// make both entries durable before any checkpoint is relied on.
	for _, d := range []string{filepath.Join(dir, CheckpointDir), dir} {
		if err := syncDir(d); err != nil {
			return nil, fmt.Errorf("open checkpoint store: %w", err)
		}
	}
	return &CheckpointStore{FileSnapshotStore: fs, dir: filepath.Join(dir, CheckpointDir, raftSnapshotsDir), outbound: outbound, sending: sending}, nil
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
	return &durableSink{SnapshotSink: sink, dir: s.dir}, nil
}

// raftSnapshotsDir is where raft's FileSnapshotStore keeps its checkpoints
// under the directory it is given (its unexported snapPath).
const raftSnapshotsDir = "snapshots"

type durableSink struct {
	raft.SnapshotSink
	dir string
}

func (d *durableSink) Close() error {
	if err := d.SnapshotSink.Close(); err != nil {
		return err
	}
	if err := syncDir(filepath.Join(d.dir, d.ID())); err != nil {
		return fmt.Errorf("checkpoint %s: %w", d.ID(), err)
	}
	return nil
}

// ErrRebuildPending reports that the host's outbound rebuild limit is
// reached; raft retries the transfer.
var ErrRebuildPending = fmt.Errorf("outbound rebuild pending: the host's concurrent rebuild limit is reached")

// Open opens a checkpoint; transfers to peers are admitted and throttled.
func (s *CheckpointStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if s.outbound == nil || s.sending == nil || !s.sending() {
		return s.FileSnapshotStore.Open(id)
	}
	wrap, release, ok := s.outbound.Begin()
	if !ok {
		return nil, nil, ErrRebuildPending
	}
	meta, rc, err := s.FileSnapshotStore.Open(id)
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
