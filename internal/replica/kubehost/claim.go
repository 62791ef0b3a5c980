package kubehost

// Backing claims: the host protects a claim it uses with the backing-use
// finalizer before its worker starts (docs/replica-engine.md, "Kubernetes
// mode"); only the manager removes it, after the host's release
// acknowledgement. The claim must be bound: its PV names the publication
// beneath the consumer mount root.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// protectClaim reads the replica's backing claim, checks it is this
// replica's and bound on this node, and adds the backing-use finalizer.
func (a *Agent) protectClaim(ctx context.Context, vr *storagev1alpha1.VolumeReplica) (*corev1.PersistentVolumeClaim, error) {
	c := &corev1.PersistentVolumeClaim{}
	if err := a.reader.Get(ctx, client.ObjectKey{Namespace: vr.Namespace, Name: vr.Spec.BackingClaimName}, c); err != nil {
		return nil, fmt.Errorf("read backing claim %s: %w", vr.Spec.BackingClaimName, err)
	}
	if c.Labels[storagev1alpha1.LabelReplica] != vr.Name || c.Annotations[storagev1alpha1.AnnotationSelectedNode] != a.opts.Node {
		return nil, fmt.Errorf("claim %s is not replica %s's on node %s (labels %v, selected node %q): left alone",
			c.Name, vr.Name, a.opts.Node, c.Labels, c.Annotations[storagev1alpha1.AnnotationSelectedNode])
	}
	if c.DeletionTimestamp != nil {
		return nil, fmt.Errorf("backing claim %s is being deleted", c.Name)
	}
	if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName == "" {
		return nil, fmt.Errorf("backing claim %s is not bound yet (phase %q)", c.Name, c.Status.Phase)
	}
	if controllerutil.AddFinalizer(c, storagev1alpha1.FinalizerBackingUse) {
		if err := a.client.Update(ctx, c); err != nil {
			return nil, fmt.Errorf("add finalizer %s to claim %s: %w", storagev1alpha1.FinalizerBackingUse, c.Name, err)
		}
	}
	return c, nil
}
