package replica

// The volume's capacity and exactly-once table size are replicated state
// (fsm/limits.go). A replica's own configuration only proposes them: the
// first coordinator of a volume commits its configured limits before it
// serves anything, so no client entry ever applies under limits another
// replica does not share. A later coordinator configured differently keeps
// the committed limits and says so; growing them is a separate command
// (volume expansion), never a side effect of a restart.

import (
	"fmt"

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
