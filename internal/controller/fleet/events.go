package fleet

// Events the operator records on the fleet (docs/fleet-operator.md, Events).
// Each is recorded on a transition, never again for the same step on a
// later reconcile: on the write that makes the step (a growth run, a
// contraction step, a capacity step, the orphaning delete of a StatefulSet,
// a handoff phase, a force-delete), or, for what status reports (Blocked,
// the deletion phases), when the condition's reason changes.

import (
	"fmt"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

const (
	eventForceDeleted         = "MemberForceDeleted"
	eventDiskLost             = "MemberDiskLost"
	eventReplacementPrepared  = "ReplacementPrepared"
	eventMemberReplaced       = "MemberReplaced" // the handoff committed
	eventReplacementAborted   = "ReplacementAborted"
	eventReplacementReleased  = "ReplacementReleased"
	eventBlocked              = "Blocked"
	eventUnblocked            = "Unblocked"
	eventStatefulSetRecreated = "StatefulSetRecreated"
	eventGrowthRun            = "GrowthRun"
	eventContractionStep      = "ContractionStep"
	eventCapacityStep         = "CapacityStep"
	eventDeletingCompute      = "DeletingCompute"
	eventDeletingDisks        = "DeletingDisks"
	eventFleetRemoved         = "FleetRemoved"
)

func (r *Reconciler) event(f *celldv1alpha1.CelldFleet, eventType, reason, action, format string, args ...any) {
	if r.recorder == nil {
		return
	}
	r.recorder.Eventf(f, nil, eventType, reason, action, "%s", fmt.Sprintf(format, args...))
}
