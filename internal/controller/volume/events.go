package volume

// Events the controller records on a volume: placement, a volume waiting for
// nodes, claim growth, replicas closing, the end of the teardown, and the
// transitions of its coordinator and robustness (transitions.go). A
// cluster-scoped volume's events land in the default namespace.
//
// The events recorder (client-go tools/events, what the manager's
// GetEventRecorder returns) merges events with the same type, reason,
// action, reporting controller, regarding and related object (the
// references include the objects' resourceVersion) into one series that
// keeps the first event's message and counts the others. Events that say
// something different about one volume in one reconcile (a placement per
// replica) therefore name the replica as the related object, or they read
// as the first one repeated (docs/operate.md, "Volume events").

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// EventReason is the reason of an event about a volume.
type EventReason string

// String is the reason as the event carries it.
func (r EventReason) String() string { return string(r) }

// Reasons of the placement, growth and teardown events; the other steps'
// are beside them (replacement.go, stuck.go, orphan.go, divergence.go,
// transitions.go).
const (
	EventPlaced            EventReason = "Placed"
	EventPending           EventReason = "Pending"
	EventClaimExpanded     EventReason = "ClaimExpanded"
	EventCapacityRequested EventReason = "CapacityRequested"
	EventReplicaClosing    EventReason = "ReplicaClosing"
	EventDeleted           EventReason = "Deleted"
)

// event records an event about rv alone.
func (r *Reconciler) event(rv *storagev1alpha1.ReplicatedVolume, eventType string, reason EventReason, action, format string, args ...any) {
	r.eventAbout(rv, nil, eventType, reason, action, format, args...)
}

// eventAbout records an event about rv that concerns related (a replica):
// events of one reason about different replicas stay distinct events.
func (r *Reconciler) eventAbout(rv *storagev1alpha1.ReplicatedVolume, related runtime.Object, eventType string, reason EventReason, action, format string, args ...any) {
	if r.recorder == nil {
		return
	}
	r.recorder.Eventf(rv, related, eventType, reason.String(), action, "%s", fmt.Sprintf(format, args...))
}

// Event types, as the events API names them.
const (
	eventNormal  = corev1.EventTypeNormal
	eventWarning = corev1.EventTypeWarning
)
