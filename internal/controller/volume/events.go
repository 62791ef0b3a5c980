package volume

// Events the controller records on a volume: placement, a volume waiting for
// nodes, claim growth, replicas closing and the end of the teardown. A
// cluster-scoped volume's events land in the default namespace.

import (
	"fmt"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

func (r *Reconciler) event(rv *storagev1alpha1.ReplicatedVolume, eventType, reason, action, format string, args ...any) {
	if r.recorder == nil {
		return
	}
	r.recorder.Eventf(rv, nil, eventType, reason, action, "%s", fmt.Sprintf(format, args...))
}
