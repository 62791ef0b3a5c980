package volume

// Backing claims: one PVC of the backing class per replica, named like the
// replica and bound to its node through the selected-node annotation, as the
// scheduler would for a WaitForFirstConsumer class, so the local provisioner
// provisions it on that node. A claim grows with the volume's capacity and
// never shrinks.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// ensureClaim creates the replica's backing claim or grows it to the
// volume's capacity; it reports whether the claim holds that capacity
// (growth.go).
func (r *Reconciler) ensureClaim(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, vr *storagev1alpha1.VolumeReplica) (bool, error) {
	cur := &corev1.PersistentVolumeClaim{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: vr.Spec.BackingClaimName}, cur)
	if apierrors.IsNotFound(err) {
		pvc := r.newClaim(rv, vr)
		if err := r.client.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("create backing claim %s on node %s: %w", pvc.Name, vr.Spec.Node, err)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read backing claim %s: %w", vr.Spec.BackingClaimName, err)
	}
	if !ownedBy(cur, rv) {
		return false, fmt.Errorf("backing claim %s/%s exists and is not volume %s's: it is never adopted", cur.Namespace, cur.Name, rv.Name)
	}
	if node := cur.Annotations[storagev1alpha1.AnnotationSelectedNode]; node != vr.Spec.Node {
		return false, fmt.Errorf("backing claim %s is bound to node %q, its replica to %q: left alone", cur.Name, node, vr.Spec.Node)
	}
	if got := cur.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(rv.Spec.Capacity) < 0 {
		cur.Spec.Resources.Requests[corev1.ResourceStorage] = rv.Spec.Capacity
		if err := r.client.Update(ctx, cur); err != nil {
			return false, fmt.Errorf("grow backing claim %s to %s: %w", cur.Name, rv.Spec.Capacity.String(), err)
		}
		r.event(rv, eventNormal, EventClaimExpanded, "Expand", "backing claim %s grows to %s", cur.Name, rv.Spec.Capacity.String())
	}
	if claimHolds(cur, rv.Spec.Capacity) {
		return true, nil
	}
	return r.recordLocalExpansion(ctx, cur)
}

func (r *Reconciler) newClaim(rv *storagev1alpha1.ReplicatedVolume, vr *storagev1alpha1.VolumeReplica) *corev1.PersistentVolumeClaim {
	meta := r.childMeta(rv, r.namespace, vr.Spec.BackingClaimName)
	meta.Labels[storagev1alpha1.LabelNode] = vr.Spec.Node
	meta.Labels[storagev1alpha1.LabelReplica] = vr.Name
	meta.Annotations = map[string]string{storagev1alpha1.AnnotationSelectedNode: vr.Spec.Node}
	class := rv.Spec.BackingStorageClassName
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: meta,
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
			StorageClassName: &class,
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: rv.Spec.Capacity},
			},
		},
	}
}
