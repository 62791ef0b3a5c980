package fleet

// Events the operator records on the fleet: force-deletes, lost disks,
// replaced members, aborted replacements and changes of Blocked.

import (
	"fmt"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

const (
	eventForceDeleted       = "MemberForceDeleted"
	eventDiskLost           = "MemberDiskLost"
	eventMemberReplaced     = "MemberReplaced"
	eventReplacementAborted = "ReplacementAborted"
	eventBlocked            = "Blocked"
	eventUnblocked          = "Unblocked"
)

func (r *Reconciler) event(f *celldv1alpha1.CelldFleet, eventType, reason, action, format string, args ...any) {
	if r.recorder == nil {
		return
	}
	r.recorder.Eventf(f, nil, eventType, reason, action, "%s", fmt.Sprintf(format, args...))
}
