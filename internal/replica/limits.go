package replica

// The volume's capacity and exactly-once table size are replicated state
// (fsm/limits.go). A replica's own configuration only proposes them: the
// first coordinator of a volume commits its configured limits before it
// serves anything, so no client entry ever applies under limits another
// replica does not share. A later coordinator configured differently keeps
// the committed limits and says so; growing them is a separate command
// (volume expansion), never a side effect of a restart.

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/fsm"
)

// configuredLimits are the limits this replica's configuration proposes.
func (c *Config) configuredLimits() fsm.Limits {
	l := fsm.DefaultLimits()
	if c.Capacity > 0 {
		l.Capacity = c.Capacity
	}
	if c.MaxSessions > 0 {
		l.MaxSessions = c.MaxSessions
	}
	return l
}

// commitLimits commits the configured limits when none are replicated yet.
// The coordinator calls it after its term's barrier and before serving.
func (w *Worker) commitLimits() error {
	want := w.cfg.configuredLimits()
	if got, set := w.fsm.Limits(); set {
		if got != want {
			w.log.Warn("configured volume limits differ from the replicated ones; the replicated ones apply",
				"configuredCapacity", want.Capacity, "capacity", got.Capacity,
				"configuredMaxSessions", want.MaxSessions, "maxSessions", got.MaxSessions)
		}
		return nil
	}
	fut := w.raft.Apply(fsm.EncodeSetLimits(want), w.cfg.ApplyTimeout)
	if err := fut.Error(); err != nil {
		return fmt.Errorf("commit the volume's limits: %w", err)
	}
	if err, _ := fut.Response().(error); err != nil {
		return fmt.Errorf("commit the volume's limits: %w", err)
	}
	w.log.Info("volume limits committed", "capacity", want.Capacity, "maxSessions", want.MaxSessions)
	return nil
}

// ErrShrink refuses a capacity below the replicated one: a volume's
// capacity only grows.
var ErrShrink = errors.New("volume capacity only grows")

// GrowCapacity commits a larger capacity through Raft (volume expansion).
// Only the coordinator proposes it; followers learn it from the log. It is
// idempotent (the capacity in force commits nothing), refuses a shrink
// with ErrShrink, and keeps the replicated exactly-once table size. It returns the
// capacity in force afterwards.
func (w *Worker) GrowCapacity(capacity uint64) (uint64, error) {
	w.memberMu.Lock() // one configuration-like change at a time
	defer w.memberMu.Unlock()
	if w.raft.State() != raft.Leader || w.lead.Load() == nil {
		return 0, ErrNotCoordinator
	}
	cur, _ := w.fsm.Limits()
	switch {
	case capacity == cur.Capacity:
		return cur.Capacity, nil
	case capacity < cur.Capacity:
		return cur.Capacity, fmt.Errorf("%w: %d bytes requested, %d committed", ErrShrink, capacity, cur.Capacity)
	}
	next := cur
	next.Capacity = capacity
	fut := w.raft.Apply(fsm.EncodeSetLimits(next), w.cfg.ApplyTimeout)
	if err := fut.Error(); err != nil {
		return cur.Capacity, fmt.Errorf("grow the volume's capacity to %d: %w", capacity, err)
	}
	if err, _ := fut.Response().(error); err != nil {
		return cur.Capacity, fmt.Errorf("grow the volume's capacity to %d: %w", capacity, err)
	}
	w.log.Info("volume capacity grown", "from", cur.Capacity, "to", capacity)
	return capacity, nil
}

// Capacity is the capacity this replica serves: the replicated one as far
// as it has applied the log.
func (w *Worker) Capacity() uint64 {
	l, _ := w.fsm.Limits()
	return l.Capacity
}
