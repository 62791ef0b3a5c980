package fleet

// Migration (docs/fleet-operator.md, "Migration from v0.0.5 and the 0023
// controller"): fleets created by v0.0.5 or the unreleased 0023 controller run
// a StatefulSet with the OnDelete strategy. The operator adopts it in place: it
// switches to RollingUpdate and writes the current template, and Kubernetes
// replaces each earlier Pod, highest ordinal first, including Pods still held
// by the launcher scheduling gate. Retained claims keep their names and
// identities. The reservation annotation is rewritten by reservation.go on its
// first write.
//
// podManagementPolicy is immutable, and an adopted StatefulSet may use
// OrderedReady (the API default). Kept as it is, that policy stalls the
// migration: the StatefulSet controller stops at the first Pod, in ordinal
// order, that is not Running and Ready, before it reaches the rolling update,
// and a Pod held by the launcher's gate never runs. So the operator
// recreates such a StatefulSet: it deletes it with propagation Orphan, bound
// to its UID and resourceVersion, so its Pods and claims stay, and creates
// the rendered one once the old is gone; the new StatefulSet adopts the
// orphaned Pods and replaces them through its rolling update. A member's
// claim is never touched.

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// needsMigration says the StatefulSet does not yet use the rolling update
// with partition 0 that every rollout takes.
func needsMigration(sts *appsv1.StatefulSet) bool {
	s := sts.Spec.UpdateStrategy
	if s.Type != appsv1.RollingUpdateStatefulSetStrategyType && s.Type != "" {
		return true
	}
	return s.RollingUpdate != nil && s.RollingUpdate.Partition != nil && *s.RollingUpdate.Partition != 0
}

// podManagementDiffers says the StatefulSet's immutable podManagementPolicy
// is not the one the operator renders.
func podManagementDiffers(got, want *appsv1.StatefulSet) bool {
	return got.Spec.PodManagementPolicy != want.Spec.PodManagementPolicy
}

// recreateStatefulSet deletes the StatefulSet, orphaning its Pods, so the
// next reconcile creates it with the rendered podManagementPolicy. A
// conflict (the StatefulSet changed since it was read) waits for the next
// reconcile.
func (r *Reconciler) recreateStatefulSet(ctx context.Context, f *celldv1alpha1.CelldFleet, sts *appsv1.StatefulSet, rep *report) error {
	rep.requeueSoon()
	rep.progress(celldv1alpha1.ReasonRollingOut,
		"recreating StatefulSet %s: its podManagementPolicy %s is immutable and the operator renders %s; its Pods and claims are kept",
		sts.Name, sts.Spec.PodManagementPolicy, appsv1.ParallelPodManagement)
	if sts.DeletionTimestamp != nil {
		return nil // the garbage collector is orphaning its Pods
	}
	uid, rv := sts.UID, sts.ResourceVersion
	err := r.client.Delete(ctx, sts, client.Preconditions{UID: &uid, ResourceVersion: &rv},
		client.PropagationPolicy(metav1.DeletePropagationOrphan))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete StatefulSet %s (orphaning its Pods) to change podManagementPolicy: %w", sts.Name, err)
	}
	if err == nil {
		r.log.Info("deleted StatefulSet, orphaning its Pods, to recreate it with the rendered podManagementPolicy",
			"fleet", f.Name, "namespace", f.Namespace, "statefulSet", sts.Name, "policy", sts.Spec.PodManagementPolicy)
		r.event(f, corev1.EventTypeNormal, eventStatefulSetRecreated, "Migrate",
			"deleted StatefulSet %s with propagation Orphan: its podManagementPolicy %s is immutable and the operator renders %s; it is recreated and adopts its Pods, which keep their disks",
			sts.Name, sts.Spec.PodManagementPolicy, appsv1.ParallelPodManagement)
	}
	return nil
}

// orphanedMembers is one past the highest ordinal of a member Pod that no
// controller owns (left by a StatefulSet deleted with propagation Orphan): a
// recreated StatefulSet starts with at least that many replicas, so it adopts
// them instead of removing several at once.
func orphanedMembers(f *celldv1alpha1.CelldFleet, obs *observation) int32 {
	var n int32
	for i := range obs.pods {
		p := &obs.pods[i]
		if i, ok := ordinalOf(f, p.Name); ok && metav1.GetControllerOf(p) == nil && i+1 > n {
			n = i + 1
		}
	}
	return n
}
