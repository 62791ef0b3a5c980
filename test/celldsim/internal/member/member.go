// Package member is celldsim's member: a test fixture that honours the celld
// runtime contract the fleet operator relies on (docs/fleet-operator.md,
// "Profiles"), not a celld.
//
//   - It recovers its state before it reports healthy: it replays its record
//     log, and on a fresh disk (no identity file) it first copies every record
//     from a recovered peer. Only then does /.well-known/celld/health answer 200.
//   - A write is acknowledged only after the record is fsynced to CELLD_WATCH and
//     fsynced by at least MinPeerCopies peers.
//   - SIGTERM drains: health turns 503, new writes are refused, writes in flight
//     finish, bounded by CELLD_SHUTDOWN_TOTAL_MS.
//   - GET /state on the internal listener reports what the member holds.
//
// It owns the HTTP APIs, replication and recovery; the on-disk format is
// package store's. It must never import Kubernetes or operator code.
package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/cellfleet/cellfleet/test/celldsim/internal/store"
)

// IdentityName is the file whose presence marks a disk that has recovered
// once: a disk without it is fresh and must recover from peers first.
const IdentityName = "celldsim.id"

// Config is a member's runtime configuration, read from celld's environment.
type Config struct {
	Node            string        // CELLD_NODE
	PodUID          string        // CELLD_SIM_POD_UID, else read from /proc/self/mountinfo; "" if unknown
	AppAddr         string        // CELLD_ADDR: application API and health
	InternalAddr    string        // CELLD_INTERNAL_ADDR: /state and the peer API
	Watch           string        // CELLD_WATCH: the state directory (the member's disk)
	Peers           PeerSource    // from CELLD_SIM_PEERS, else derived from CELLD_ADVERTISE
	MinPeerCopies   int           // peers that must hold a record before it is acknowledged
	PeerTimeout     time.Duration // bound of one peer call
	ShutdownTotal   time.Duration // CELLD_SHUTDOWN_TOTAL_MS: the drain bound
	BootstrapWindow time.Duration // how long a fresh disk waits for a recovered peer before it starts a new fleet
}

// Member is one running celldsim.
type Member struct {
	cfg    Config
	log    *slog.Logger
	store  *store.Store
	client *http.Client
	// snapshots copies whole logs: the peer must answer within PeerTimeout, the body may take longer.
	snapshots *http.Client

	recovered     atomic.Bool
	draining      atomic.Bool
	fresh         bool         // the disk had no identity when the member started
	recoveredFrom atomic.Value // string: the peer a fresh disk copied from, "" for a new fleet or a retained disk
	writes        *writeGate
}

// New opens the member's disk, unless the disk's startup-denial marker names
// this Pod (ErrStartupDenied). It does not serve or recover yet: Run does.
func New(cfg Config, log *slog.Logger) (*Member, error) {
	if cfg.MinPeerCopies < 0 {
		return nil, fmt.Errorf("min peer copies %d is negative", cfg.MinPeerCopies)
	}
	if err := checkDenial(cfg.Watch, cfg.PodUID); err != nil {
		return nil, err
	}
	_, err := os.Stat(filepath.Join(cfg.Watch, IdentityName))
	fresh := errors.Is(err, os.ErrNotExist)
	if err != nil && !fresh {
		return nil, fmt.Errorf("read identity in %s: %w", cfg.Watch, err)
	}
	s, err := store.Open(cfg.Watch)
	if err != nil {
		return nil, err
	}
	return &Member{
		cfg: cfg, log: log.With("node", cfg.Node), store: s, fresh: fresh,
		client: &http.Client{Timeout: cfg.PeerTimeout}, writes: newWriteGate(),
		snapshots: &http.Client{Timeout: snapshotTimeout,
			Transport: &http.Transport{ResponseHeaderTimeout: cfg.PeerTimeout}},
	}, nil
}

// Run serves both listeners, recovers, and drains when ctx is cancelled
// (SIGTERM). It returns once the drain is over.
func (m *Member) Run(ctx context.Context) error {
	defer m.store.Close()
	app, err := net.Listen("tcp", m.cfg.AppAddr)
	if err != nil {
		return fmt.Errorf("listen on application address %s: %w", m.cfg.AppAddr, err)
	}
	internal, err := net.Listen("tcp", m.cfg.InternalAddr)
	if err != nil {
		app.Close()
		return fmt.Errorf("listen on internal address %s: %w", m.cfg.InternalAddr, err)
	}
	appSrv := &http.Server{Handler: m.appHandler(), ReadHeaderTimeout: 5 * time.Second}
	intSrv := &http.Server{Handler: m.internalHandler(), ReadHeaderTimeout: 5 * time.Second}
	serveErr := make(chan error, 2)
	go func() { serveErr <- appSrv.Serve(app) }()
	go func() { serveErr <- intSrv.Serve(internal) }()
	m.log.Info("serving", "app", app.Addr().String(), "internal", internal.Addr().String(),
		"records", m.store.Len(), "freshDisk", m.fresh, "peers", m.cfg.Peers.String())

	recoverCtx, stopRecovery := context.WithCancel(ctx)
	defer stopRecovery()
	go m.recover(recoverCtx)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("listener stopped: %w", err)
	}
	return m.drain(appSrv, intSrv)
}

// drain refuses new writes (health answers 503 from now on), waits for the
// writes in flight, and closes the listeners, all within ShutdownTotal.
func (m *Member) drain(appSrv, intSrv *http.Server) error {
	start := time.Now()
	m.draining.Store(true)
	m.log.Info("draining", "bound", m.cfg.ShutdownTotal.String())
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownTotal)
	defer cancel()
	select {
	case <-m.writes.close():
	case <-ctx.Done():
		m.log.Warn("drain bound reached with writes in flight: they stay unacknowledged")
	}
	appErr := appSrv.Shutdown(ctx)
	intErr := intSrv.Shutdown(ctx)
	if errors.Is(appErr, context.DeadlineExceeded) || errors.Is(intErr, context.DeadlineExceeded) {
		appSrv.Close()
		intSrv.Close()
	}
	m.log.Info("drained", "took", time.Since(start).String(), "records", m.store.Len())
	return nil
}

// Ready reports whether the member serves: recovered and not draining.
func (m *Member) Ready() bool { return m.recovered.Load() && !m.draining.Load() }

// State is the body of GET /state.
type State struct {
	Node          string `json:"node"`
	Ready         bool   `json:"ready"`
	Recovered     bool   `json:"recovered"`
	Draining      bool   `json:"draining"`
	FreshDisk     bool   `json:"freshDisk"`
	RecoveredFrom string `json:"recoveredFrom,omitempty"`
	Records       int    `json:"records"`
	WritesFlying  int    `json:"writesInFlight"`
}

func (m *Member) state() State {
	return State{
		Node: m.cfg.Node, Ready: m.Ready(), Recovered: m.recovered.Load(), Draining: m.draining.Load(),
		FreshDisk: m.fresh, RecoveredFrom: m.source(), Records: m.store.Len(),
		WritesFlying: m.writes.inFlight(),
	}
}

func (m *Member) source() string {
	s, _ := m.recoveredFrom.Load().(string)
	return s
}
