package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellfleet/cellfleet/internal/csi/publication"
	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/mux"
)

// Config configures a host.
type Config struct {
	StateDir string // host storage: the initialisation history
	Limits   Limits
	// DialPeer is each worker's replica.Config.DialPeer: the client is
	// outside the host's dependencies (doc.go), so its process gives it.
	DialPeer    replica.DialPeer
	SegmentSize int
	Logger      *slog.Logger
	// HaltAt halts every worker start at a test fault point (fault.go);
	// empty in production.
	HaltAt FaultPoint
}

// Host runs workers.
type Host struct {
	cfg      Config
	log      *slog.Logger
	hist     history
	starts   *slots
	http     *slots
	captures *slots
	out      *outbound
	metrics  *metrics
	// ready is the mode's own readiness check (http.go, SetReadiness).
	ready atomic.Pointer[func() error]

	mu      sync.Mutex
	workers map[string]*hosted
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type hosted struct {
	spec   WorkerSpec
	worker *replica.Worker
	mu     sync.Mutex
	state  replica.State // until the worker exists
	reason string
	// creds are the worker's credentials (credentials.go); credMu orders
	// their loads, so the last load made reads the newest files.
	credMu sync.Mutex
	creds  *mux.CredentialSet
}

// ConditionType is the host's explicit answer past a bound.
type ConditionType string

// Condition types.
const (
	ConditionPending     ConditionType = "Pending"
	ConditionUnavailable ConditionType = "Unavailable"
)

// Reason says which bound produced a condition.
type Reason string

// Reasons.
const (
	ReasonWorkerLimitReached        Reason = "WorkerLimitReached"
	ReasonStartLimitReached         Reason = "StartLimitReached"
	ReasonHTTPOperationLimitReached Reason = "HTTPOperationLimitReached"
)

// Condition is the host's explicit answer past a bound.
type Condition struct {
	Condition ConditionType `json:"condition"`
	Reason    Reason        `json:"reason"`
	Message   string        `json:"message"`
}

// Error makes a Condition an error.
func (c *Condition) Error() string {
	return string(c.Condition) + ": " + string(c.Reason) + ": " + c.Message
}

// New creates a host.
func New(cfg Config) (*Host, error) {
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	if cfg.StateDir == "" {
		return nil, errors.New("host state directory is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HaltAt != "" && cfg.HaltAt != FaultAfterIntent && cfg.HaltAt != FaultBeforeSealed {
		return nil, fmt.Errorf("unknown test fault point %q (want %s or %s)", cfg.HaltAt, FaultAfterIntent, FaultBeforeSealed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{cfg: cfg, log: cfg.Logger, hist: history{dir: cfg.StateDir},
		starts:   newSlots(BoundStarts, cfg.Limits.MaxStarts),
		http:     newSlots(BoundHTTP, cfg.Limits.MaxHTTPOperations),
		captures: newSlots(BoundCaptures, cfg.Limits.MaxCaptures),
		out:      newOutbound(cfg.Limits.MaxRebuilds, cfg.Limits.RebuildBandwidth),
		workers:  map[string]*hosted{}, ctx: ctx, cancel: cancel}
	h.metrics = newMetrics(h)
	return h, nil
}

// ErrExists reports a worker already hosted.
var ErrExists = errors.New("worker already hosted")

// Add admits a worker and starts it when a start slot is free. It returns
// the worker's state: Starting, or Pending (with the condition) when all
// start slots are taken. Past MaxWorkers it returns an Unavailable
// condition and hosts nothing.
func (h *Host) Add(spec WorkerSpec) (replica.State, *Condition, error) {
	if err := spec.Validate(); err != nil {
		return "", nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return "", nil, errors.New("host is shutting down")
	}
	if _, ok := h.workers[spec.Key()]; ok {
		return "", nil, fmt.Errorf("%w: %s", ErrExists, spec.Key())
	}
	if len(h.workers) >= h.cfg.Limits.MaxWorkers {
		h.metrics.rejected(BoundWorkers)
		return "", &Condition{Condition: ConditionUnavailable, Reason: ReasonWorkerLimitReached,
			Message: fmt.Sprintf("the host already runs %d workers, its limit", h.cfg.Limits.MaxWorkers)}, nil
	}
	hw := &hosted{spec: spec, state: replica.ReplicaStatePending}
	h.workers[spec.Key()] = hw
	var cond *Condition
	if h.starts.TryAcquire() {
		hw.state = replica.ReplicaStateStarting
		h.wg.Add(1)
		go h.start(hw, true)
		return replica.ReplicaStateStarting, nil, nil
	} else {
		cond = &Condition{Condition: ConditionPending, Reason: ReasonStartLimitReached,
			Message: fmt.Sprintf("%d workers are starting, the host's limit; this one waits for a slot", h.cfg.Limits.MaxStarts)}
		hw.reason = cond.Message
		h.wg.Add(1)
		go h.start(hw, false)
	}
	return replica.ReplicaStatePending, cond, nil
}

func (h *Host) start(hw *hosted, haveSlot bool) {
	defer h.wg.Done()
	if !haveSlot {
		if err := h.starts.Acquire(h.ctx); err != nil {
			return
		}
	}
	defer h.starts.Release()
	hw.mu.Lock()
	hw.state, hw.reason = replica.ReplicaStateStarting, ""
	hw.mu.Unlock()
	w, err := h.prepare(hw)
	if err != nil {
		h.log.Error("worker not started", "volume", hw.spec.Volume, "replica", hw.spec.Replica, "error", err)
		state := replica.ReplicaStateFailed
		if errors.Is(err, ErrNotSameReplica) {
			// Its recorded storage is not the one it was given: as for a
			// missing identity, the replica is lost, never started afresh.
			state = replica.ReplicaStateLost
		}
		hw.mu.Lock()
		hw.state, hw.reason = state, err.Error()
		hw.mu.Unlock()
		return
	}
	if w == nil {
		return // halted at a test fault point
	}
	hw.mu.Lock()
	hw.worker = w
	hw.mu.Unlock()
	if err := w.Start(); err != nil {
		return // the worker reports Lost or Failed itself
	}
	h.mu.Lock()
	removed := h.workers[hw.spec.Key()] != hw
	h.mu.Unlock()
	if removed { // Remove ran while the worker was being built
		w.Close()
		return
	}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		w.Close()
	}
}

// prepare waits for the data directory, records the intent (history.go)
// and builds the worker. It returns a nil worker and no error when a test
// fault point halted it.
func (h *Host) prepare(hw *hosted) (*replica.Worker, error) {
	spec := hw.spec
	if err := h.awaitPublication(hw); err != nil {
		return nil, err
	}
	st, err := h.checkHistory(spec)
	if err != nil {
		return nil, err
	}
	if st != standingSealed {
		if err := h.hist.record(spec, PhaseIntent); err != nil {
			return nil, err
		}
	}
	if !h.halt(FaultAfterIntent, spec) {
		return nil, nil
	}
	sealed := func() error {
		if st == standingSealed {
			return nil
		}
		if !h.halt(FaultBeforeSealed, spec) {
			return errors.New("halted at a test fault point")
		}
		if err := h.hist.record(spec, PhaseSealed); err != nil {
			return err
		}
		st = standingSealed
		return nil
	}
	return h.build(hw, st == standingSealed, sealed)
}

// checkHistory reads the replica's standing in the host's history. A
// sealed record of other storage is refused (ErrNotSameReplica); a sealed
// record written before the storage fields existed is completed with the
// spec's, so later starts are checked. An intent of other storage never
// ran Raft: it is simply recorded again.
func (h *Host) checkHistory(spec WorkerSpec) (standing, error) {
	rec, found, err := h.hist.recorded(spec.Volume, spec.Replica)
	if err != nil || !found {
		return standingNone, err
	}
	st := rec.standing(spec.Generation)
	if st != standingSealed {
		return st, nil
	}
	if err := rec.sameStorage(spec); err != nil {
		return st, err
	}
	if rec.Generation == spec.Generation && rec.lacksStorage(spec) {
		if err := h.hist.record(spec, PhaseSealed); err != nil {
			return st, err
		}
	}
	return st, nil
}

// PublicationTimeout bounds the wait for a data directory to be published.
const PublicationTimeout = 10 * time.Minute

// awaitPublication waits until the backing volume's bind is visible at the
// data directory in this process's own mount namespace: until then the
// path is the bare directory of this container's view, and initialising
// or reading authority there would use the wrong filesystem.
func (h *Host) awaitPublication(hw *hosted) error {
	if !hw.spec.AwaitDataDir {
		return nil
	}
	hw.mu.Lock()
	hw.reason = "waiting for the backing volume's bind at the data directory"
	hw.mu.Unlock()
	ctx, cancel := context.WithTimeout(h.ctx, PublicationTimeout)
	defer cancel()
	if err := publication.WaitForBind(ctx, hw.spec.DataDir); err != nil {
		return fmt.Errorf("data directory %s was not published: %w", hw.spec.DataDir, err)
	}
	return nil
}

func (h *Host) build(hw *hosted, recorded bool, sealed func() error) (*replica.Worker, error) {
	spec := hw.spec
	creds, err := hw.loadCredentials()
	if err != nil {
		return nil, err
	}
	self := spec.Self
	if self.ID == "" {
		self.ID = spec.Replica
	}
	if self.Address == "" {
		self.Address = spec.Listen
	}
	return replica.New(replica.Config{
		Volume: spec.Volume, Replica: spec.Replica, Generation: spec.Generation,
		DataDir: spec.DataDir, Listen: spec.Listen, Self: self, Peers: spec.Peers, Bootstrap: spec.Bootstrap,
		Credentials: creds, Capacity: spec.CapacityBytes, MaxSessions: spec.MaxSessions,
		Recorded: recorded, OnSealed: sealed, SegmentSize: h.cfg.SegmentSize, Timing: spec.Timing,
		Capture: h.captures, Outbound: h.out, Observer: h.metrics, DialPeer: h.cfg.DialPeer,
		Logger: h.log,
	})
}

// Remove stops and forgets a worker; its disk state is kept.
func (h *Host) Remove(key string) error {
	h.mu.Lock()
	hw, ok := h.workers[key]
	delete(h.workers, key)
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("no worker %s", key)
	}
	if w := hw.get(); w != nil {
		return w.Close()
	}
	return nil
}

func (hw *hosted) get() *replica.Worker {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	return hw.worker
}

// Status is one worker's report.
type Status struct {
	replica.Stats
	Generation uint64 `json:"generation"`
	Addr       string `json:"addr,omitempty"`
	// DataExtent is "unknown" for a lost replica.
	DataExtent string `json:"dataExtent,omitempty"`
}

func (hw *hosted) status() Status {
	hw.mu.Lock()
	w, state, reason := hw.worker, hw.state, hw.reason
	hw.mu.Unlock()
	s := Status{Generation: hw.spec.Generation}
	if w != nil {
		s.Stats = w.Stats()
		s.Addr = w.Addr()
	} else {
		s.Stats = replica.Stats{Volume: hw.spec.Volume, Replica: hw.spec.Replica, State: state, Reason: reason}
	}
	if s.State == replica.ReplicaStateLost {
		s.DataExtent = "unknown"
	}
	return s
}

// Statuses reports every worker, sorted by key.
func (h *Host) Statuses() []Status {
	h.mu.Lock()
	keys := make([]string, 0, len(h.workers))
	for k := range h.workers {
		keys = append(keys, k)
	}
	ws := h.workers
	h.mu.Unlock()
	slices.Sort(keys)
	out := make([]Status, 0, len(keys))
	h.mu.Lock()
	hs := make([]*hosted, 0, len(keys))
	for _, k := range keys {
		if hw := ws[k]; hw != nil {
			hs = append(hs, hw)
		}
	}
	h.mu.Unlock()
	for _, hw := range hs {
		out = append(out, hw.status())
	}
	return out
}

// Worker returns a hosted worker (nil until it is built).
func (h *Host) Worker(key string) (*replica.Worker, Status, bool) {
	h.mu.Lock()
	hw, ok := h.workers[key]
	h.mu.Unlock()
	if !ok {
		return nil, Status{}, false
	}
	return hw.get(), hw.status(), true
}

// WaitState waits until a worker reaches one of the states.
func (h *Host) WaitState(ctx context.Context, key string, states ...replica.State) (Status, error) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		_, st, ok := h.Worker(key)
		if !ok {
			return st, fmt.Errorf("no worker %s", key)
		}
		if slices.Contains(states, st.State) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("worker %s is %s, waited for %v: %w", key, st.State, states, ctx.Err())
		case <-t.C:
		}
	}
}

// Close stops every worker.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	ws := h.workers
	h.workers = map[string]*hosted{}
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	var wg sync.WaitGroup
	for _, hw := range ws {
		if w := hw.get(); w != nil {
			wg.Add(1)
			go func() { defer wg.Done(); w.Close() }()
		}
	}
	wg.Wait()
}
