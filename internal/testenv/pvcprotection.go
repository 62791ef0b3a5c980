package testenv

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// pvcProtection is the finalizer the API server's StorageObjectInUseProtection
// admission plugin adds to every claim.
const pvcProtection = "kubernetes.io/pvc-protection"

// LiftPVCProtection plays kube-controller-manager's PVC protection
// controller, which envtest does not run: it removes pvcProtection from every
// deleted claim of namespace that no Pod there names, so the claim goes once
// its other finalizers have. Without it a deleted claim stays forever, and a
// test could not tell a controller that waits for its claims to be gone from
// one that never gets there.
func LiftPVCProtection(ctx context.Context, c client.Client, namespace string) error {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := c.List(ctx, claims, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("list claims of %s: %w", namespace, err)
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("list pods of %s: %w", namespace, err)
	}
	used := map[string]bool{}
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				used[v.PersistentVolumeClaim.ClaimName] = true
			}
		}
	}
	for i := range claims.Items {
		claim := &claims.Items[i]
		if claim.DeletionTimestamp == nil || used[claim.Name] || !controllerutil.RemoveFinalizer(claim, pvcProtection) {
			continue
		}
		if err := c.Update(ctx, claim); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("lift %s from claim %s/%s: %w", pvcProtection, namespace, claim.Name, err)
		}
	}
	return nil
}
