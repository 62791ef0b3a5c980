package replica

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/durable"
	"github.com/cellfleet/cellfleet/internal/replica/fsm"
	"github.com/cellfleet/cellfleet/internal/replica/journal"
	"github.com/cellfleet/cellfleet/internal/replica/mux"
	"github.com/cellfleet/cellfleet/internal/replica/raftnet"
)

// Worker is one running replica.
type Worker struct {
	cfg Config
	log *slog.Logger

	state  atomic.Value // State
	reason atomic.Value // string

	id    journal.Identity
	wal   *journal.Log
	snaps *journal.CheckpointStore
	fsm   *fsm.FSM
	mux   *mux.Mux
	trans *raftnet.Transport
	raft  *raft.Raft
	// chunks fetches the chunks of a checkpoint the coordinator sends
	// (chunkpeer.go).
	chunks *chunkPeer
	shared atomic.Pointer[raft.Raft] // raft, for goroutines that may run before Start returns
	// applyWaits counts requests whose entries waited for the apply
	// backlog (roomForEntries).
	applyWaits atomic.Uint64
	addr       atomic.Value // string: the bound port
	rpc        *mux.RPCServer
	verify     verifier
	// progress is the coordinator's record of its followers' journals.
	progress progress
	// view and mark feed Health: the coordinator's commit index and the
	// entries it sent, as a follower sees them, and this worker's own last
	// index.
	view     leaderView
	mark     atomic.Pointer[progressMark]
	bounds   journalBounds
	admitted admission

	peersMu sync.RWMutex
	peers   map[raft.ServerID]Peer // as this worker reaches them

	propMu sync.Mutex
	lead   atomic.Pointer[leadership]

	memberMu sync.Mutex
	startMu  sync.Mutex    // Close waits for a Start in progress
	failed   chan struct{} // closed when the state machine fails
	failOnce sync.Once
	stop     chan struct{}
	wg       sync.WaitGroup
	closeMu  sync.Mutex
	closed   bool
}

// New validates cfg; Start opens the replica.
func New(cfg Config) (*Worker, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("worker %s/%s: %w", cfg.Volume, cfg.Replica, err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = 5 * time.Second
	}
	w := &Worker{cfg: cfg, log: cfg.Logger.With("volume", cfg.Volume, "replica", cfg.Replica),
		peers: map[raft.ServerID]Peer{}, stop: make(chan struct{}), failed: make(chan struct{}),
		bounds: cfg.journalBounds()}
	w.peers[raft.ServerID(cfg.Self.ID)] = cfg.Self
	for _, p := range cfg.Peers {
		w.peers[raft.ServerID(p.ID)] = p
	}
	w.setState(ReplicaStatePending, "")
	return w, nil
}

func (w *Worker) setState(s State, reason string) {
	w.state.Store(s)
	w.reason.Store(reason)
}

// State returns the lifecycle state and, for Lost or Failed, why.
func (w *Worker) State() (State, string) {
	return w.state.Load().(State), w.reason.Load().(string)
}

// Start opens the replica: identity and loss checks, journal, checkpoints,
// state machine, port and Raft. A LostError leaves the worker in
// ReplicaStateLost with nothing on disk changed.
func (w *Worker) Start() error {
	w.startMu.Lock()
	defer w.startMu.Unlock()
	w.closeMu.Lock()
	closed := w.closed
	w.closeMu.Unlock()
	if closed {
		return errors.New("worker closed before it started")
	}
	w.setState(ReplicaStateStarting, "")
	err := w.start()
	switch {
	case errors.Is(err, journal.ErrLost):
		w.setState(ReplicaStateLost, err.Error())
		w.log.Error("replica lost; not starting", "error", err)
	case err != nil:
		w.setState(ReplicaStateFailed, err.Error())
		w.log.Error("replica failed to start", "error", err)
	default:
		w.setState(ReplicaStateRunning, "")
		w.log.Info("replica running", "listen", w.Addr())
	}
	if err != nil {
		w.closeParts()
	}
	return err
}

func (w *Worker) start() error {
	dir := w.cfg.DataDir
	// Durably: a data directory whose own entry a power cut drops takes its
	// synced journal with it, and the replica would start empty.
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	want := journal.Identity{Volume: w.cfg.Volume, Replica: w.cfg.Replica, Generation: w.cfg.Generation}
	verdict, err := journal.Check(dir, want, w.cfg.Recorded)
	if err != nil {
		return err
	}
	if verdict.Fresh {
		if err := w.initialise(want); err != nil {
			return err
		}
		verdict.Identity = want
	}
	w.id = verdict.Identity
	hl := raftLogger(w.log)
	if w.wal, err = journal.OpenJournal(dir, int64(w.cfg.SegmentSize), w.log); err != nil {
		if errors.Is(err, journal.ErrCorrupt) {
			return &journal.LostError{Volume: w.cfg.Volume, Replica: w.cfg.Replica, Reason: err.Error()}
		}
		return err
	}
	leading := func() bool { r := w.shared.Load(); return r != nil && r.State() == raft.Leader }
	// The state machine opens first: its chunk store decides which
	// checkpoints can be restored (fsm.FSM.ExpandCheckpoint), and so which
	// one Usable finds.
	if err := w.openFSM(); err != nil {
		return err
	}
	if w.snaps, err = journal.OpenCheckpoints(dir, 2, hl, w.cfg.Outbound, leading, w.fsm.ExpandCheckpoint); err != nil {
		return err
	}
	first, _ := w.wal.FirstIndex()
	last, _ := w.wal.LastIndex()
	ckpt, err := w.snaps.Usable(w.id, first)
	if err != nil {
		return err
	}
	if err := journal.CheckFloor(w.id, first, last, ckpt); err != nil {
		return err
	}
	if last != 0 && ckpt > last {
		// A crash after installing a checkpoint, before raft removed the
		// old entries: they are all covered by the checkpoint, and the next
		// append (after its index) could not follow them.
		w.log.Warn("journal tail superseded by the checkpoint removed", "journalLast", last, "checkpoint", ckpt)
		if err := w.wal.Reset(); err != nil {
			return fmt.Errorf("remove the journal tail superseded by checkpoint %d: %w", ckpt, err)
		}
	}
	if err := w.openRaft(hl, verdict.Fresh); err != nil {
		return err
	}
	w.wg.Add(2)
	go w.watch()
	go w.boundJournal()
	return nil
}

// initialise prepares a replica nothing was ever recorded for: an unsealed
// identity first, so a crash before sealing is redone, never mistaken for
// loss or for an initialised replica.
func (w *Worker) initialise(id journal.Identity) error {
	for _, d := range []string{journal.JournalDir, journal.CheckpointDir} {
		if err := os.RemoveAll(filepath.Join(w.cfg.DataDir, d)); err != nil {
			return fmt.Errorf("clear unsealed initialisation: %w", err)
		}
	}
	w.log.Info("initialising a new replica", "generation", id.Generation)
	return journal.WriteIdentity(w.cfg.DataDir, id)
}

func (w *Worker) openFSM() error {
	w.chunks = &chunkPeer{w: w}
	f, err := fsm.New(fsm.Options{
		Dir:     w.cfg.DataDir,
		Capture: w.cfg.Capture,
		Logger:  w.log,
		Chunks:  w.chunks,
		OnCheckpoint: func(n int64) {
			if w.cfg.Observer != nil {
				w.cfg.Observer.Checkpoint(w.cfg.Volume, w.cfg.Replica, n)
			}
		},
		OnFail: func(error) { w.failOnce.Do(func() { close(w.failed) }) },
		OnRestore: func(d time.Duration) {
			if w.cfg.Observer != nil {
				w.cfg.Observer.Restore(w.cfg.Volume, w.cfg.Replica, d)
			}
		},
	})
	w.fsm = f
	return err
}

func (w *Worker) openRaft(hl hclog.Logger, fresh bool) error {
	w.rpc = &mux.RPCServer{Credentials: w.cfg.Credentials, Handler: w.serve, Logger: w.log}
	m, err := mux.Listen(mux.Config{
		Listen:      w.cfg.Listen,
		Credentials: w.cfg.Credentials,
		AllowedPeer: w.allowedPeer,
		Resolve:     splitAddress,
		OnRPC:       func(c *tls.Conn) { w.rpc.ServeConn(c) },
		Logger:      w.log,
	})
	if err != nil {
		return err
	}
	w.mux = m
	w.addr.Store(m.Addr().String())
	w.trans, err = raftnet.New(raftnet.Config{
		Stream:                m.StreamLayer(),
		ServerAddressProvider: addressProvider{w},
		Limits:                raftnet.Limits{MaxEntries: acceptEntries, MaxEntryBytes: maxEntryBytes},
		MaxPool:               3,
		Timeout:               10 * time.Second,
		Logger:                w.log,
		BeforeEntries:         w.roomForEntries,
	})
	if err != nil {
		return fmt.Errorf("start the raft transport: %w", err)
	}
	rc := w.cfg.raftConfig()
	rc.Logger = hl
	notify := make(chan bool, 16)
	rc.NotifyCh = notify
	if fresh && w.cfg.Bootstrap {
		err := raft.BootstrapCluster(rc, w.wal, w.wal, w.snaps, w.trans, w.bootstrapConfig())
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return fmt.Errorf("bootstrap the volume's configuration: %w", err)
		}
	}
	// Seal before Raft runs: from here on this replica may acknowledge
	// entries, so a crash must never be mistaken for an unfinished
	// initialisation.
	if !w.id.Sealed {
		w.id.Sealed = true
		if err := journal.WriteIdentity(w.cfg.DataDir, w.id); err != nil {
			return err
		}
	}
	if w.cfg.OnSealed != nil {
		if err := w.cfg.OnSealed(); err != nil {
			return fmt.Errorf("record the sealed replica: %w", err)
		}
	}
	w.raft, err = raft.NewRaft(rc, w.fsm, w.wal, w.wal, w.snaps, observedTransport{w.trans, &w.progress, &inbound{view: &w.view, stop: w.stop}})
	if err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	w.fsm.Started()
	w.verify.r = w.raft
	w.shared.Store(w.raft)
	w.wg.Add(1)
	go w.leadership(notify)
	return nil
}

func (w *Worker) bootstrapConfig() raft.Configuration {
	var c raft.Configuration
	c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(w.cfg.Self.ID), Address: w.cfg.Self.raftAddress()})
	for _, p := range w.cfg.Peers {
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: p.raftAddress()})
	}
	return c
}

// allowedPeer admits a Raft connection whose certificate names a replica in
// the current configuration or this worker's peer list.
func (w *Worker) allowedPeer(san string) bool {
	w.peersMu.RLock()
	for _, p := range w.peers {
		if p.ServerName == san {
			w.peersMu.RUnlock()
			return true
		}
	}
	w.peersMu.RUnlock()
	r := w.shared.Load()
	if r == nil {
		return false
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if name, _, ok := splitAddress(s.Address); ok && name == san {
			return true
		}
	}
	return false
}

// FloorInterval is how often a worker records its newest checkpoint index
// as the identity's floor. A long interval keeps idle workers quiet; the
// floor only has to trail the checkpoints.
const FloorInterval = 10 * time.Second

// watch stops the worker when its state machine fails, samples its
// progress for Health and advances the identity's floor as checkpoints are
// taken.
func (w *Worker) watch() {
	defer w.wg.Done()
	t := time.NewTicker(FloorInterval)
	defer t.Stop()
	sample := time.NewTicker(healthSample)
	defer sample.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.failed:
			w.setState(ReplicaStateFailed, w.fsm.Failed().Error())
			go w.Close()
			return
		case <-sample.C:
			w.sampleProgress(w.raft)
			continue
		case <-t.C:
		}
		if idx := w.snaps.LatestIndex(); idx > w.id.Floor {
			id := w.id
			id.Floor = idx
			if err := journal.WriteIdentity(w.cfg.DataDir, id); err != nil {
				w.log.Error("recording the checkpoint floor failed", "error", err)
				continue
			}
			w.id = id
		}
	}
}

// Close stops the worker; its disk state is kept.
func (w *Worker) Close() error {
	w.startMu.Lock()
	defer w.startMu.Unlock()
	w.closeMu.Lock()
	defer w.closeMu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	close(w.stop)
	w.closeParts()
	w.wg.Wait()
	if s, _ := w.State(); s == ReplicaStateRunning || s == ReplicaStateStarting || s == ReplicaStatePending {
		w.setState(ReplicaStateStopped, "")
	}
	return nil
}

func (w *Worker) closeParts() {
	if w.raft != nil {
		if err := w.raft.Shutdown().Error(); err != nil {
			w.log.Warn("raft shutdown", "error", err)
		}
	}
	if w.rpc != nil {
		w.rpc.Close()
	}
	if w.trans != nil {
		w.trans.Close()
	}
	if w.mux != nil {
		w.mux.Close()
	}
	if w.wal != nil {
		w.wal.Close()
	}
	if w.fsm != nil {
		w.fsm.Close()
	}
	if w.chunks != nil {
		w.chunks.close()
	}
}

// Addr is the worker's bound port (after Start).
func (w *Worker) Addr() string {
	a, _ := w.addr.Load().(string)
	return a
}

// Stats is a point-in-time view of the worker for health and metrics.
type Stats struct {
	Volume, Replica string
	State           State
	Reason          string
	RaftState       string
	Leader          string
	Term            uint64
	CommitIndex     uint64
	AppliedIndex    uint64
	LastIndex       uint64
	// CoordinatorCommit is the coordinator's commit index as this worker
	// knows it: its own on the coordinator, on a follower the highest of its
	// own and the one the coordinator's last AppendEntries carried (a
	// follower's own commit index never passes its journal, so it cannot
	// show how far behind a rebuilding follower is). Lag is measured from it.
	CoordinatorCommit uint64
	// Healthy is false when the worker is not a working member of its
	// group (Health): not running, its journal appends fail, or its journal
	// stalls behind the coordinator's commit index. HealthReason says why.
	Healthy      bool
	HealthReason string `json:",omitempty"`
	// Followers is the coordinator's view of every other replica (empty on
	// a follower): its match index and lag behind the coordinator's last
	// index.
	Followers []FollowerProgress `json:",omitempty"`
	// ReadIndexRounds counts the quorum checks (raft's VerifyLeader) this
	// worker made for reads as coordinator, Reads the reads that waited
	// for them: concurrent reads share a round (leader.go).
	ReadIndexRounds, Reads uint64
	// ApplyBacklogWaits counts the replication requests this replica, as
	// a follower, held until its state machine caught up (bounds.go).
	ApplyBacklogWaits uint64
}

// Stats reads the worker's state without blocking on Raft.
func (w *Worker) Stats() Stats {
	st, reason := w.State()
	s := Stats{Volume: w.cfg.Volume, Replica: w.cfg.Replica, State: st, Reason: reason,
		ReadIndexRounds: w.verify.rounds.Load(), Reads: w.verify.reads.Load(), ApplyBacklogWaits: w.applyWaits.Load()}
	if r := w.shared.Load(); r != nil && st == ReplicaStateRunning {
		s.RaftState = r.State().String()
		_, id := r.LeaderWithID()
		s.Leader = string(id)
		s.Term = r.CurrentTerm()
		s.CommitIndex = r.CommitIndex()
		s.AppliedIndex = w.fsm.Applied()
		s.LastIndex = r.LastIndex()
		s.CoordinatorCommit = s.CommitIndex
		if r.State() != raft.Leader {
			s.CoordinatorCommit = max(s.CommitIndex, w.view.commit.Load())
		}
		s.Followers = w.followers(r, s.LastIndex)
		h := w.Health()
		s.Healthy, s.HealthReason = h.Healthy, h.Reason
	}
	return s
}

// addressProvider gives raft this worker's own route to each peer (which a
// test may point at a fault-injecting proxy); unknown IDs fall back to the
// address in the configuration entry.
type addressProvider struct{ w *Worker }

func (a addressProvider) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	a.w.peersMu.RLock()
	defer a.w.peersMu.RUnlock()
	if p, ok := a.w.peers[id]; ok {
		return p.raftAddress(), nil
	}
	return "", fmt.Errorf("no local route to %s", id)
}
