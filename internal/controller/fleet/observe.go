package fleet

// observe reads, once per reconcile, everything the gates decide from: the
// workload, the member Pods, the namespace's claims and the replacement holds.

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

type observation struct {
	sts    *appsv1.StatefulSet // nil when absent
	deploy *appsv1.Deployment  // nil when absent
	// members are the StatefulSet member Pods by ordinal, terminating or not:
	// Pods named <fleet>-<n> that the fleet's StatefulSet controls. A Pod that
	// only carries the fleet label is never healed, replaced or force-deleted.
	members map[int32]*corev1.Pod
	// pods are every Pod carrying the fleet label.
	pods []corev1.Pod
	// claims are the namespace's claims by name.
	claims map[string]*corev1.PersistentVolumeClaim
}

func (r *Reconciler) observe(ctx context.Context, f *celldv1alpha1.CelldFleet) (*observation, error) {
	obs := &observation{members: map[int32]*corev1.Pod{}, claims: map[string]*corev1.PersistentVolumeClaim{}}
	key := client.ObjectKey{Namespace: f.Namespace, Name: workloadName(f)}
	if statefulSetFleet(f) {
		sts := &appsv1.StatefulSet{}
		switch err := r.client.Get(ctx, key, sts); {
		case err == nil:
			obs.sts = sts
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("read StatefulSet %s: %w", key, err)
		}
	} else {
		d := &appsv1.Deployment{}
		switch err := r.client.Get(ctx, key, d); {
		case err == nil:
			obs.deploy = d
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("read Deployment %s: %w", key, err)
		}
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(f.Namespace), client.MatchingLabels(selectorLabels(f))); err != nil {
		return nil, fmt.Errorf("list member Pods: %w", err)
	}
	obs.pods = pods.Items
	for i := range obs.pods {
		p := &obs.pods[i]
		if n, ok := ordinalOf(f, p.Name); ok && statefulSetFleet(f) && obs.controlsMember(f, p) {
			obs.members[n] = p
		}
	}
	if persistent(f) {
		var claims corev1.PersistentVolumeClaimList
		if err := r.client.List(ctx, &claims, client.InNamespace(f.Namespace)); err != nil {
			return nil, fmt.Errorf("list claims: %w", err)
		}
		for i := range claims.Items {
			obs.claims[claims.Items[i].Name] = &claims.Items[i]
		}
	}
	return obs, nil
}

// controlsMember says the fleet's StatefulSet controls p: by UID while it
// exists, by kind and name once it is gone (a deleted fleet's Pods outlive it).
func (o *observation) controlsMember(f *celldv1alpha1.CelldFleet, p *corev1.Pod) bool {
	owner := metav1.GetControllerOf(p)
	if owner == nil || owner.Kind != "StatefulSet" || owner.Name != workloadName(f) {
		return false
	}
	return o.sts == nil || owner.UID == o.sts.UID
}

// applied is the replica count written to the workload (0 when absent).
func (o *observation) applied() int32 {
	switch {
	case o.sts != nil && o.sts.Spec.Replicas != nil:
		return *o.sts.Spec.Replicas
	case o.deploy != nil && o.deploy.Spec.Replicas != nil:
		return *o.deploy.Spec.Replicas
	}
	return 0
}
