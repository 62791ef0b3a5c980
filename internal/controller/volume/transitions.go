package volume

// Transitions of a volume's coordinator and robustness are events
// (docs/operate.md, "Volume events"), so `kubectl get events` and
// `kubectl celld volume` tell when a volume went Degraded and which replica
// took over, not only how it is now. They are judged where status is derived and written (status.go,
// writeStatus) from the status before and after a write that succeeded: an
// unchanged status is never written, so a transition is one event however
// often the volume is reconciled, and a write that conflicts records
// nothing (the retry records it once).

import (
	"k8s.io/apimachinery/pkg/api/meta"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Events of coordinator and robustness transitions (docs/operate.md,
// "Volume events").
const (
	EventCoordinatorChanged EventReason = "CoordinatorChanged"
	EventCoordinatorLost    EventReason = "CoordinatorLost"
	EventVolumeHealthy      EventReason = "VolumeHealthy"
	EventVolumeDegraded     EventReason = "VolumeDegraded"
	EventVolumeFaulted      EventReason = "VolumeFaulted"
)

// robustnessEvent is the event type and reason of arriving at a robustness.
var robustnessEvent = map[storagev1alpha1.Robustness]struct {
	eventType string
	reason    EventReason
}{
	storagev1alpha1.RobustnessHealthy:  {eventNormal, EventVolumeHealthy},
	storagev1alpha1.RobustnessDegraded: {eventWarning, EventVolumeDegraded},
	storagev1alpha1.RobustnessFaulted:  {eventWarning, EventVolumeFaulted},
}

// transitionsWritten records the coordinator and robustness transitions of
// a status write that succeeded. A volume's first status has nothing to
// transition from (a new volume is Faulted until its hosts report; its
// Healthy event follows), and a volume being deleted loses its replicas on
// purpose (its Deleting condition says how far the teardown is).
func (r *Reconciler) transitionsWritten(rv *storagev1alpha1.ReplicatedVolume, before, after storagev1alpha1.ReplicatedVolumeStatus) {
	if before.Robustness == "" || rv.DeletionTimestamp != nil {
		return
	}
	message := func(t storagev1alpha1.ConditionType) string {
		if c := meta.FindStatusCondition(after.Conditions, t.String()); c != nil {
			return c.Message
		}
		return ""
	}
	switch {
	case after.Coordinator != "" && after.Coordinator != before.Coordinator:
		was := "no ready coordinator before"
		if before.Coordinator != "" {
			was = "was " + before.Coordinator
		}
		r.event(rv, eventNormal, EventCoordinatorChanged, "Observe", "replica %s coordinates the volume (%s)", after.Coordinator, was)
	case after.Coordinator == "" && before.Coordinator != "":
		r.event(rv, eventWarning, EventCoordinatorLost, "Observe", "no ready replica coordinates the volume (was %s): %s",
			before.Coordinator, message(storagev1alpha1.VolumeReady))
	}
	if after.Robustness == before.Robustness {
		return
	}
	ev, ok := robustnessEvent[after.Robustness]
	if !ok {
		return
	}
	why := message(storagev1alpha1.VolumeDegraded) // names the replicas, or says all are current
	if after.Robustness == storagev1alpha1.RobustnessFaulted {
		why = message(storagev1alpha1.VolumeReady) // says why no quorum serves
	}
	r.event(rv, ev.eventType, ev.reason, "Observe", "robustness %s (was %s): %s", after.Robustness, before.Robustness, why)
}
