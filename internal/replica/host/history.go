package host

// The host's history: its own record, on host storage apart from the
// replicas' data directories, of which replicas it initialised, so that a
// wiped data directory is recognised as loss rather than a new replica
// (seed 003: "A recorded replica is never freshly initialized when
// retained authority is missing").
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
}

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

// standing reads the record of this generation of the replica. A record of
// a later generation counts as sealed: an older generation is superseded
// and never initialised again.
func (h history) standing(volume, replica string, generation uint64) (standing, error) {
	b, err := os.ReadFile(h.path(volume, replica))
	if errors.Is(err, os.ErrNotExist) {
		return standingNone, nil
	}
	if err != nil {
		return standingNone, fmt.Errorf("read host history: %w", err)
	}
	var r historyRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return standingNone, fmt.Errorf("host history of %s/%s is corrupt: %w", volume, replica, err)
	}
	switch {
	case r.Generation > generation:
		return standingSealed, nil
	case r.Generation < generation:
		return standingNone, nil
	case r.Phase == PhaseIntent:
		return standingIntent, nil
	default:
		return standingSealed, nil
	}
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
	rec := historyRecord{Volume: spec.Volume, Replica: spec.Replica, Generation: spec.Generation, Phase: phase}
	if err := durable.WriteJSON(p, rec); err != nil {
		return fmt.Errorf("record %s in the host history: %w", phase, err)
	}
	return nil
}
