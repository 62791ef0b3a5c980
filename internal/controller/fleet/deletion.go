package fleet

// Fleet deletion (docs/fleet-operator.md, "Deletion"): compute first, then
// every fleet disk, and the bucket reservation is kept. Replacement holds were
// already released without any further disk delete (settleHolds in release-only
// mode). Every delete is bound to the object's UID.

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func (r *Reconciler) deleteFleet(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation, rep *report) error {
	if !controllerutil.ContainsFinalizer(f, celldv1alpha1.FinalizerFleet) {
		return nil
	}
	rep.requeueSoon()
	if done, err := r.deleteCompute(ctx, f, obs, rep); !done || err != nil {
		return err
	}
	if persistent(f) {
		if done, err := r.deleteDisks(ctx, f, obs, rep); !done || err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(f, celldv1alpha1.FinalizerFleet)
	if err := r.client.Update(ctx, f); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove fleet finalizer: %w", err)
	}
	r.metrics.forget(f.Namespace, f.Name)
	r.event(f, corev1.EventTypeNormal, eventFleetRemoved, "Delete",
		"the fleet's compute and disks are gone; its bucket reservation %s is kept", f.Spec.Storage.Bucket)
	rep.gone = true
	return nil
}

// deleteCompute deletes the workload and reports done once no member Pod is
// left.
func (r *Reconciler) deleteCompute(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation, rep *report) (bool, error) {
	// A member Pod on a node that no longer answers would otherwise hold the
	// fleet's deletion (and its disks) forever: the stranded-Pod rule applies
	// while the fleet is deleted too.
	if err := r.forceDeleteStranded(ctx, f, obs, rep); err != nil {
		return false, err
	}
	var workload client.Object
	switch {
	case obs.sts != nil && metav1.IsControlledBy(obs.sts, f):
		workload = obs.sts
	case obs.deploy != nil && metav1.IsControlledBy(obs.deploy, f):
		workload = obs.deploy
	}
	if workload != nil {
		rep.deleting(celldv1alpha1.ReasonDeletingCompute, "deleting %s %s", kindOf(workload), workload.GetName())
		if workload.GetDeletionTimestamp() == nil {
			uid := workload.GetUID()
			err := r.client.Delete(ctx, workload, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
			if err != nil && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("delete workload %s: %w", workload.GetName(), err)
			}
		}
		return false, nil
	}
	if len(obs.pods) > 0 {
		rep.deleting(celldv1alpha1.ReasonDeletingCompute, "waiting for %d member Pods to go", len(obs.pods))
		return false, nil
	}
	return true, nil
}

// deleteDisks deletes every claim carrying the fleet's UID label and reports
// done once each deletion is accepted.
func (r *Reconciler) deleteDisks(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation, rep *report) (bool, error) {
	pending := 0
	for _, c := range obs.claims {
		if c.Labels[celldv1alpha1.LabelFleetUID] != string(f.UID) || c.DeletionTimestamp != nil {
			continue
		}
		pending++
		uid := c.UID
		if err := r.client.Delete(ctx, c, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete fleet claim %s: %w", c.Name, err)
		}
	}
	if pending > 0 {
		rep.deleting(celldv1alpha1.ReasonDeletingDisks, "deleting %d fleet disks", pending)
		return false, nil
	}
	return true, nil
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *appsv1.StatefulSet:
		return "StatefulSet"
	case *appsv1.Deployment:
		return "Deployment"
	case *corev1.Pod:
		return "Pod"
	}
	return fmt.Sprintf("%T", o)
}
