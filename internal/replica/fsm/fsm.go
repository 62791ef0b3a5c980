package fsm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/chunkstore"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// DefaultMaxWindow is the number of unacknowledged results kept per
// session when Options.MaxWindow is zero.
const DefaultMaxWindow = 1024

// Capture bounds concurrent checkpoint captures across a host. Acquire
// returns false when no slot is free; the capture is then retried at the
// next checkpoint interval rather than queued.
type Capture interface {
	TryAcquire() bool
	Release()
}

// Options configures an FSM.
type Options struct {
	Dir string // the replica's data directory; the FSM owns Dir/store (the chunk store) and Dir/staging
	// MaxWindow bounds the unacknowledged results kept per session (0:
	// DefaultMaxWindow). It only refuses a call (ErrnoWindowFull) and must be
	// the same on every replica; the volume's capacity and session table are
	// replicated (Limits).
	MaxWindow int
	Capture   Capture // nil: unbounded
	Logger    *slog.Logger
	// OnCheckpoint reports a captured checkpoint's size in bytes.
	OnCheckpoint func(bytes int64)
	// OnRestore reports how long installing a checkpoint took.
	OnRestore func(d time.Duration)
	// OnFail is called once when a backing disk error stops the state
	// machine.
	OnFail func(error)
	// Chunks fetches the chunks a checkpoint received from another replica
	// names and this one lacks (restore.go); nil: none can be fetched.
	Chunks ChunkSource
	// ChunkSize is the chunk size of a new chunk store (0: the store's
	// default); an existing store keeps its own.
	ChunkSize int
}

// FSM is the state machine. Apply, Snapshot and Restore are called by raft
// on one goroutine; queries run concurrently under the read lock.
type FSM struct {
	opt Options
	log *slog.Logger

	mu sync.RWMutex
	st *state
	// store holds the files' bytes (docs/decisions/0010-chunked-store.md);
	// its live state changes under mu's write lock, with st.
	store *chunkstore.Store

	appliedMu sync.Mutex
	applied   uint64
	advanced  chan struct{}

	failMu sync.Mutex
	failed error

	// fetching is set once raft has started: a checkpoint received from the
	// coordinator may then name chunks this store lacks, which Restore
	// fetches (restore.go). Before, raft is opening checkpoints to start
	// from, and one whose chunks are gone must fail to open.
	fetching atomic.Bool
}

// Orphaned returns the bytes of chunks of deleted, truncated or punched
// ranges that only kept checkpoints still name: space two checkpoints give
// back (chunkstore.Store.Orphaned).
func (f *FSM) Orphaned() uint64 { return f.store.Orphaned() }

// Started tells the state machine that raft has restored its starting
// state: from now on a checkpoint is opened to restore one received from
// the coordinator, whose missing chunks Restore fetches.
func (f *FSM) Started() { f.fetching.Store(true) }

// New opens the chunk store with its live state empty (raft restores the
// newest checkpoint and replays the journal on top: they are the
// authority), removes what an earlier format left, and returns an empty
// state machine.
func New(opt Options) (*FSM, error) {
	if opt.MaxWindow <= 0 {
		opt.MaxWindow = DefaultMaxWindow
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	f := &FSM{opt: opt, log: opt.Logger, advanced: make(chan struct{})}
	// tree/, tree.old/ and captures/ are the backing files of format 1 and
	// 2 replicas, never an authority (docs/journal-format.md).
	for _, d := range []string{"tree", "tree.old", "staging", "captures"} {
		if err := os.RemoveAll(filepath.Join(opt.Dir, d)); err != nil {
			return nil, fmt.Errorf("discard %s of a previous run: %w", d, err)
		}
	}
	store, err := chunkstore.Open(filepath.Join(opt.Dir, storeDir), chunkstore.Options{ChunkSize: opt.ChunkSize, Retain: retainCheckpoints})
	if err != nil {
		return nil, fmt.Errorf("open the chunk store: %w", err)
	}
	if err := store.Reset(); err != nil && !errors.Is(err, chunkstore.ErrCollect) {
		store.Close()
		return nil, fmt.Errorf("open the chunk store: %w", err)
	}
	f.store = store
	f.st = newState(0)
	return f, nil
}

const (
	// storeDir is the chunk store's directory in the data directory.
	storeDir = "store"
	// retainCheckpoints is how many manifests the store keeps: as many as
	// raft keeps checkpoints (the worker's journal.OpenCheckpoints).
	retainCheckpoints = 2
)

// Close closes the chunk store.
func (f *FSM) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.store.Close(); err != nil {
		f.log.Warn("closing the chunk store", "error", err)
	}
}

// Failed returns the disk error that stopped the state machine, if any. A
// failed state machine applies nothing more: its replica must stop rather
// than diverge.
func (f *FSM) Failed() error {
	f.failMu.Lock()
	defer f.failMu.Unlock()
	return f.failed
}

func (f *FSM) fail(err error) {
	f.failMu.Lock()
	defer f.failMu.Unlock()
	if f.failed == nil {
		f.failed = err
		f.log.Error("state machine stopped on a backing disk error", "error", err)
		if f.opt.OnFail != nil {
			go f.opt.OnFail(err)
		}
	}
}

// ErrFailed is returned by queries once the state machine has failed.
var ErrFailed = errors.New("replica state machine failed")

// Applied returns the index of the last applied log entry.
func (f *FSM) Applied() uint64 {
	f.appliedMu.Lock()
	defer f.appliedMu.Unlock()
	return f.applied
}

// NextIno returns the lowest inode number never used.
func (f *FSM) NextIno() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.NextIno
}

// WaitApplied blocks until the applied index reaches idx.
func (f *FSM) WaitApplied(ctx context.Context, idx uint64) error {
	for {
		f.appliedMu.Lock()
		if f.applied >= idx {
			f.appliedMu.Unlock()
			return nil
		}
		ch := f.advanced
		f.appliedMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for applied index %d: %w", idx, ctx.Err())
		}
	}
}

func (f *FSM) setApplied(idx uint64) {
	f.appliedMu.Lock()
	if idx > f.applied {
		f.applied = idx
		close(f.advanced)
		f.advanced = make(chan struct{})
	}
	f.appliedMu.Unlock()
}

// StoreConfiguration records that a membership entry was applied, so the
// applied index the coordinator waits on covers configuration entries too
// (raft.ConfigurationStore).
func (f *FSM) StoreConfiguration(index uint64, _ raft.Configuration) { f.setApplied(index) }

var _ raft.ConfigurationStore = (*FSM)(nil)

// Apply applies one committed entry and returns []wire.Result (or an error
// for an entry that does not decode, which no coordinator proposes).
func (f *FSM) Apply(l *raft.Log) interface{} {
	defer f.setApplied(l.Index)
	if l.Type != raft.LogCommand {
		return nil
	}
	if lim, ok := decodeSetLimits(l.Data); ok {
		return f.applyLimits(l.Index, lim)
	}
	en, err := wire.DecodeEntry(l.Data)
	if err != nil {
		// Deterministic on every replica: the same bytes fail the same way.
		f.log.Error("journal entry does not decode; skipped on every replica", "index", l.Index, "error", err)
		return fmt.Errorf("entry %d: %w", l.Index, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.Applied = l.Index
	results := make([]wire.Result, len(en.Ops))
	for i := range en.Ops {
		results[i] = f.applyOnce(l.Index, en.Time, &en.Ops[i])
	}
	return results
}

// applyOnce applies op unless its session already has a result for it.
func (f *FSM) applyOnce(index uint64, now int64, op *wire.Op) wire.Result {
	if f.Failed() != nil {
		return errno(syscall.EIO) // this replica stopped applying
	}
	if op.Kind == wire.KindRegister {
		f.register(index, op.Session)
		return wire.Result{}
	}
	s := f.st.Sessions[op.Session]
	if s == nil {
		return wire.Result{Errno: wire.ErrnoSessionExpired}
	}
	s.LastUsed = index
	if op.Seq < s.Floor {
		return wire.Result{Errno: wire.ErrnoStaleSequence}
	}
	if acked := min(op.Acked, op.Seq); acked > s.Floor {
		for seq := range s.Results {
			if seq < acked {
				delete(s.Results, seq)
			}
		}
		s.Floor = acked
	}
	if r, ok := s.Results[op.Seq]; ok {
		return r // applied before any fence that followed: its result stands
	}
	if f.st.superseded(op.Epoch) {
		return wire.Result{Errno: wire.ErrnoFenced}
	}
	if len(s.Results) >= f.opt.MaxWindow {
		return wire.Result{Errno: wire.ErrnoWindowFull}
	}
	if op.Time == 0 {
		op.Time = now
	}
	r := f.mutate(op)
	s.Results[op.Seq] = r
	return r
}

func (f *FSM) register(index, id uint64) {
	if s := f.st.Sessions[id]; s != nil {
		s.LastUsed = index
		return
	}
	f.st.Sessions[id] = &session{ID: id, LastUsed: index, Results: map[uint64]wire.Result{}}
	f.evictSessions()
}

// evictSessions drops the least recently used sessions beyond the table's
// replicated size.
func (f *FSM) evictSessions() {
	for len(f.st.Sessions) > f.limits().MaxSessions {
		var victim *session
		for _, s := range f.st.Sessions {
			if victim == nil || s.LastUsed < victim.LastUsed || (s.LastUsed == victim.LastUsed && s.ID < victim.ID) {
				victim = s
			}
		}
		delete(f.st.Sessions, victim.ID)
		f.freeOrphans(victim.ID)
	}
}

func (f *FSM) mutate(op *wire.Op) wire.Result {
	switch op.Kind {
	case wire.KindCreate, wire.KindMkdir, wire.KindMknod, wire.KindSymlink:
		return f.makeNode(op)
	case wire.KindLink:
		return f.link(op)
	case wire.KindUnlink:
		return f.unlink(op, false)
	case wire.KindRmdir:
		return f.unlink(op, true)
	case wire.KindRename:
		return f.rename(op)
	case wire.KindWrite:
		return f.write(op)
	case wire.KindTruncate:
		return f.truncate(op.Ino, op.Size, op.Time)
	case wire.KindFallocate:
		return f.fallocate(op)
	case wire.KindSetattr:
		return f.setattr(op)
	case wire.KindSetxattr:
		return f.setxattr(op)
	case wire.KindRemovexattr:
		return f.removexattr(op)
	case wire.KindRelease:
		return f.release(op)
	case wire.KindFence:
		return f.openFence()
	case wire.KindReserveInos:
		return f.reserveInos(op)
	default:
		return errno(syscall.EINVAL)
	}
}
