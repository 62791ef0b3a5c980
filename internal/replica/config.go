package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/fsm"
	"github.com/cellfleet/cellfleet/internal/replica/journal"
	"github.com/cellfleet/cellfleet/internal/replica/mux"
)

// State is a worker's lifecycle state as the host reports it.
type State string

// Worker states.
const (
	// ReplicaStatePending: admitted, waiting for a start slot.
	ReplicaStatePending State = "Pending"
	// ReplicaStateStarting: opening the journal and joining the group.
	ReplicaStateStarting State = "Starting"
	// ReplicaStateRunning: serving Raft (and clients when coordinator).
	ReplicaStateRunning State = "Running"
	// ReplicaStateLost: recorded replica whose identity or journal is
	// missing or truncated; data extent unknown; never initialised afresh.
	ReplicaStateLost State = "ReplicaStateLost"
	// ReplicaStateFailed: stopped on an error (disk, configuration).
	ReplicaStateFailed State = "Failed"
	// ReplicaStateStopped: closed by the host.
	ReplicaStateStopped State = "Stopped"
)

// Peer is one replica of the volume as this worker reaches it.
type Peer struct {
	ID         string `json:"id"`
	Address    string `json:"address"`    // host:port this worker dials
	ServerName string `json:"serverName"` // DNS SAN of its certificate
}

// raftAddress encodes the SAN with the dial address so that a membership
// entry carries everything a peer needs to verify the new member.
func (p Peer) raftAddress() raft.ServerAddress {
	return raft.ServerAddress(p.ServerName + "@" + p.Address)
}

// splitAddress is the inverse of raftAddress.
func splitAddress(a raft.ServerAddress) (san, dial string, ok bool) {
	san, dial, ok = strings.Cut(string(a), "@")
	return san, dial, ok && san != "" && dial != ""
}

// Timing tunes Raft. Zero fields take hashicorp/raft's defaults.
type Timing struct {
	HeartbeatTimeout   time.Duration `json:"heartbeatTimeout,omitempty"`
	ElectionTimeout    time.Duration `json:"electionTimeout,omitempty"`
	LeaderLeaseTimeout time.Duration `json:"leaderLeaseTimeout,omitempty"`
	CommitTimeout      time.Duration `json:"commitTimeout,omitempty"`
	SnapshotInterval   time.Duration `json:"snapshotInterval,omitempty"`
	SnapshotThreshold  uint64        `json:"snapshotThreshold,omitempty"`
	TrailingLogs       uint64        `json:"trailingLogs,omitempty"`
	// JournalBytes bounds the journal in bytes (J; 0: DefaultJournalBytes).
	// See bounds.go.
	JournalBytes uint64 `json:"journalBytes,omitempty"`
}

// Observer receives a worker's measurements (the host's metrics).
type Observer interface {
	CommitLatency(volume, replica string, d time.Duration)
	Checkpoint(volume, replica string, bytes int64)
	Restore(volume, replica string, d time.Duration)
	// Fenced counts a call refused because a newer single-writer mount
	// fenced its session; kind is "mutation" or "read".
	Fenced(volume, replica string, kind FencedKind)
}

// FencedKind says which path refused a fenced call.
type FencedKind string

// Paths that refuse fenced calls.
const (
	FencedMutation FencedKind = "mutation"
	FencedRead     FencedKind = "read"
)

// Config configures one worker.
type Config struct {
	Volume     string
	Replica    string
	Generation uint64
	DataDir    string
	Listen     string // host:port to bind
	Self       Peer   // this replica as its peers reach it
	Peers      []Peer // the other replicas
	Bootstrap  bool   // the first replica bootstraps the initial configuration

	// Credentials are the replica's certificate, the volume's CA and the
	// mount token clients present; the host may replace them while the
	// worker runs (mux/credentials.go).
	Credentials *mux.CredentialSet
	// DialPeer connects to another replica of the volume for the calls it
	// answers from its own state: the chunks of a checkpoint it sent
	// (chunkpeer.go). The client is outside the replica's dependencies
	// (doc.go), so the process gives it (cmd/replica-host: client.DialPeer).
	// Nil: a follower that needs a checkpoint's chunks fails its restore
	// and raft retries.
	DialPeer DialPeer

	Capacity    uint64
	MaxSessions int  // exactly-once sessions kept (0: fsm default, 256)
	Recorded    bool // the host's history says this replica was sealed: never initialise it afresh
	// OnSealed, when set, runs on every start once the identity is sealed
	// and before Raft starts (before this replica can vote or acknowledge):
	// the host records the replica as sealed there. An error fails the start.
	OnSealed    func() error
	SegmentSize int
	Timing      Timing
	// ApplyTimeout bounds enqueueing a proposal (default 5s).
	ApplyTimeout time.Duration

	Capture  fsm.Capture
	Outbound journal.Outbound
	Observer Observer
	Logger   *slog.Logger
}

func (c *Config) validate() error {
	var errs []error
	if c.Volume == "" || c.Replica == "" {
		errs = append(errs, errors.New("volume and replica names are required"))
	}
	if c.Generation == 0 {
		errs = append(errs, errors.New("generation must be at least 1"))
	}
	if c.DataDir == "" || c.Listen == "" {
		errs = append(errs, errors.New("data directory and listen address are required"))
	}
	if c.Self.ID != c.Replica || c.Self.ServerName == "" || c.Self.Address == "" {
		errs = append(errs, fmt.Errorf("self peer %+v must carry the replica ID, a server name and an address", c.Self))
	}
	if c.Credentials == nil {
		errs = append(errs, errors.New("the volume's CA, this replica's certificate and the bearer token are required"))
	}
	if j := c.Timing.JournalBytes; j != 0 && j < MinJournalBytes {
		errs = append(errs, fmt.Errorf("journalBytes must be at least %d, got %d", MinJournalBytes, j))
	}
	return errors.Join(errs...)
}

func (c *Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.Replica)
	t := c.Timing
	set := func(d *time.Duration, v time.Duration) {
		if v > 0 {
			*d = v
		}
	}
	set(&rc.HeartbeatTimeout, t.HeartbeatTimeout)
	set(&rc.ElectionTimeout, t.ElectionTimeout)
	set(&rc.LeaderLeaseTimeout, t.LeaderLeaseTimeout)
	set(&rc.CommitTimeout, t.CommitTimeout)
	set(&rc.SnapshotInterval, t.SnapshotInterval)
	if t.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = t.SnapshotThreshold
	}
	// Retention by bytes (bounds.go): the worker raises TrailingLogs to the
	// newest entries that fit in the budget once it sees their sizes.
	rc.TrailingLogs = c.journalBounds().initialTrailing()
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = catchUpEntries
	rc.NoLegacyTelemetry = true
	return rc
}
