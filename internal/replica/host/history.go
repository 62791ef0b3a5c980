package host

// The host's history: its own record, on host storage apart from the
// replicas' data directories, of which replicas it initialised, so that a
// wiped data directory is recognised as loss rather than a new replica
// (a recorded replica whose retained authority is missing is never
// initialised afresh: docs/replica-engine.md, "Identity, loss and
// recovery").
//
// A replica is recorded in two phases, each durable (written, fsynced,
// renamed, directory fsynced) before the step it guards:
//
//  1. Intent, before the worker starts: the identity may be written and
//     sealed next. A replica whose record says Intent has never run Raft,
//     so it never voted or acknowledged: a crash here leaves an unsealed
//     or missing identity that is initialised again, never reported lost.
//  2. Sealed, after the identity is sealed and before Raft starts
//     (replica.Config.OnSealed). From here the replica may vote and
//     acknowledge; if its identity, journal or checkpoint is then missing
//     or unsealed, it is ReplicaStateLost with extent unknown and is never
//     initialised.
//
// A record that cannot be written fails the start: a replica never runs
// Raft unless its record is durable.
//
// In Kubernetes mode a record also names the storage the replica ran on:
// its backing claim's UID, the claim's PersistentVolume and the node. A
// sealed record whose claim UID, PV or node differs from the spec's is not
// this replica's storage (the claim was recreated, or the state directory
// moved to another node): the start is refused and the replica reported
// lost, so it never runs Raft as a member that voted on other storage
// (docs/replica-engine.md, "Identity, loss and recovery"). Records written
// before these fields existed, and every standalone record, leave them
// empty: an empty field is never compared.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// RecordPhase is how far the host got in initialising a replica.
type RecordPhase string

// Record phases.
const (
	// PhaseIntent: about to seal the identity; Raft never ran.
	PhaseIntent RecordPhase = "Intent"
	// PhaseSealed: the identity is sealed; the replica may have voted.
	PhaseSealed RecordPhase = "Sealed"
)

type history struct{ dir string }

type historyRecord struct {
	Volume     string `json:"volume"`
	Replica    string `json:"replica"`
	Generation uint64 `json:"generation"`
	// Phase is empty in records written before phases existed: those were
	// written after the worker started, so they mean Sealed.
	Phase RecordPhase `json:"phase,omitempty"`
	// The storage the replica runs on (Kubernetes mode; WorkerSpec).
	ClaimUID string `json:"claimUID,omitempty"`
	PV       string `json:"pv,omitempty"`
	Node     string `json:"node,omitempty"`
}

// ErrNotSameReplica: the host's history records the replica on other
// storage than its spec names.
var ErrNotSameReplica = errors.New("not the replica the host's history recorded")

// standing is what the history knows of one generation of a replica.
type standing int

const (
	standingNone   standing = iota // never recorded: may be initialised
	standingIntent                 // intent recorded, never ran Raft
	standingSealed                 // sealed: must never be initialised again
)

// HistoryPath is where a host keeps the record of one replica.
func HistoryPath(stateDir, volume, replica string) string {
	return filepath.Join(stateDir, "initialised", volume, replica+".json")
}

func (h history) path(volume, replica string) string { return HistoryPath(h.dir, volume, replica) }

// recorded reads the replica's record; found is false when there is none.
func (h history) recorded(volume, replica string) (r historyRecord, found bool, err error) {
	b, err := os.ReadFile(h.path(volume, replica))
	if errors.Is(err, os.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("read host history: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, true, fmt.Errorf("host history of %s/%s is corrupt: %w", volume, replica, err)
	}
	return r, true, nil
}

// standing reads the record of this generation of the replica.
func (h history) standing(volume, replica string, generation uint64) (standing, error) {
	r, found, err := h.recorded(volume, replica)
	if err != nil || !found {
		return standingNone, err
	}
	return r.standing(generation), nil
}

// standing: a record of a later generation counts as sealed: an older
// generation is superseded and never initialised again.
func (r historyRecord) standing(generation uint64) standing {
	switch {
	case r.Generation > generation:
		return standingSealed
	case r.Generation < generation:
		return standingNone
	case r.Phase == PhaseIntent:
		return standingIntent
	default:
		return standingSealed
	}
}

// sameStorage checks that spec names the storage the record does; a field
// empty on either side is not compared.
func (r historyRecord) sameStorage(spec WorkerSpec) error {
	for _, f := range []struct{ what, recorded, now string }{
		{"claim UID", r.ClaimUID, spec.ClaimUID}, {"PersistentVolume", r.PV, spec.PV}, {"node", r.Node, spec.Node},
	} {
		if f.recorded != "" && f.now != "" && f.recorded != f.now {
			return fmt.Errorf("%w: the host's history records replica %s of volume %s (generation %d) with %s %q, its spec names %q: "+
				"a different replica's storage, refused (never initialised, never run)",
				ErrNotSameReplica, r.Replica, r.Volume, r.Generation, f.what, f.recorded, f.now)
		}
	}
	return nil
}

// lacksStorage: the record predates the storage fields the spec carries.
func (r historyRecord) lacksStorage(spec WorkerSpec) bool {
	return r.ClaimUID == "" && spec.ClaimUID != "" || r.PV == "" && spec.PV != "" || r.Node == "" && spec.Node != ""
}

// record makes phase the replica's durable record for generation.
func (h history) record(spec WorkerSpec, phase RecordPhase) error {
	p := h.path(spec.Volume, spec.Replica)
	// The directories may be new, the state directory itself included:
	// each new entry is synced in its parent, or a power cut could drop
	// the record with its directory and the replica would start afresh.
	if err := durable.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("record %s in the host history: %w", phase, err)
	}
	rec := historyRecord{Volume: spec.Volume, Replica: spec.Replica, Generation: spec.Generation, Phase: phase,
		ClaimUID: spec.ClaimUID, PV: spec.PV, Node: spec.Node}
	if err := durable.WriteJSON(p, rec); err != nil {
		return fmt.Errorf("record %s in the host history: %w", phase, err)
	}
	return nil
}
