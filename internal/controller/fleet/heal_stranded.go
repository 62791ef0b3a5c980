package fleet

// A Pod on a node that no longer answers (docs/fleet-operator.md,
// "Self-healing"): a member Pod still present more than two minutes after its
// termination grace ended is force-deleted, bound to its UID, so the
// StatefulSet can recreate it. The member keeps its disk: a process surviving
// on the lost node is fenced by celld's lease, and a ReadWriteOncePod disk
// attaches to one node at a time. This applies to every StatefulSet fleet,
// Ordered Bucket included.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// stranded says the Pod's termination grace ended more than two minutes ago.
// deletionTimestamp is when the grace ends.
func (r *Reconciler) stranded(p *corev1.Pod) bool {
	return terminating(p) && r.clock.Since(p.DeletionTimestamp.Time) > strandedAfterGrace
}

func (r *Reconciler) forceDeleteStranded(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation, rep *report) error {
	for _, p := range obs.members {
		if !terminating(p) {
			continue
		}
		rep.requeueSoon()
		// A held Pod waits for its hold, not for a kubelet.
		if !r.stranded(p) || controllerutil.ContainsFinalizer(p, celldv1alpha1.FinalizerReplacement) {
			continue
		}
		uid := p.UID
		err := r.client.Delete(ctx, p, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("force-delete stranded member %s: %w", p.Name, err)
		}
		if err == nil {
			r.metrics.countForceDelete(f)
			rep.healed(celldv1alpha1.ReasonForceDeletedStranded,
				"member %s was still present %s after its termination grace ended; force-deleted, it keeps its disk", p.Name, strandedAfterGrace)
			r.event(f, corev1.EventTypeWarning, eventForceDeleted, "ForceDelete",
				"member %s was still present %s after its termination grace ended; force-deleted so the StatefulSet recreates it on its own disk",
				p.Name, strandedAfterGrace)
		}
	}
	return nil
}
