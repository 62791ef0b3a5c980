package volume

// Teardown (docs/volume-controller.md, "Deletion"): workers close before
// their backing volumes are unpublished, the manager waits for the host's
// identity-bound release acknowledgement before it removes the finalizer
// and has the claim reclaimed, and an uncertain API answer leaves the
// storage as it is. In order:
//  1. every VolumeReplica is deleted; the manager's release finalizer keeps
//     it while its host closes the worker and unpublishes the backing volume;
//  2. per replica, once the host acknowledged by writing the backing claim's
//     UID into status.releasedClaimUID (a claim that was never bound and
//     never protected needs no acknowledgement), the host's backing-use
//     finalizer is removed and the claim deleted; once the claim is gone
//     (kube-controller-manager lifts kubernetes.io/pvc-protection), the
//     replica's Service and Secret go (its EndpointSlice is the host's,
//     deleted at its release, kubehost/release.go and orphans.go), and the
//     replica's release finalizer is removed;
//  3. once no replica remains, the mount and CA Secrets go and the volume's
//     finalizer is removed.
// Every delete carries the object's UID as a precondition, so an object of
// the same name created since it was read is never deleted. Any error stops
// the teardown where it is: nothing is deleted past an ambiguous answer, and
// a replica whose host never acknowledges (a node that is gone) keeps its
// claim and blocks the volume's removal, which the seed leaves blocked.
// A retired replica released without its host's acknowledgement (its host
// gone, releaseReplica) may still be published on its node: that host,
// when it comes back, unpublishes and forgets every publication of a
// replica that no longer exists (internal/replica/kubehost/orphans.go), so
// the local driver can delete the PV's directory.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// teardown advances the deletion of rv. It returns what it waits for (empty
// once the volume's finalizer is removed).
func (r *Reconciler) teardown(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, set replicaSet) (string, error) {
	var waits []string
	for _, vr := range set {
		if vr == nil {
			continue
		}
		w, err := r.releaseReplica(ctx, rv, vr, false)
		if err != nil {
			return "teardown of replica " + vr.Name + " stopped", err
		}
		if w != "" {
			waits = append(waits, w)
		}
	}
	if len(waits) > 0 {
		return strings.Join(waits, "; "), nil
	}
	if err := r.deleteSecret(ctx, rv, r.namespace, mountSecretName(rv.Name)); err != nil {
		return "removing the mount secret", err
	}
	if err := r.deleteSecret(ctx, rv, r.managerNamespace, caSecretName(rv.Name)); err != nil {
		return "removing the CA secret", err
	}
	if controllerutil.RemoveFinalizer(rv, storagev1alpha1.FinalizerVolumeTeardown) {
		if err := r.client.Update(ctx, rv); err != nil {
			return "removing the volume's finalizer", fmt.Errorf("remove finalizer of volume %s: %w", rv.Name, err)
		}
	}
	r.event(rv, eventNormal, EventDeleted, "Delete", "replicas, claims, services and secrets removed")
	r.metrics.forget(rv.Name)
	return "", nil
}

// releaseReplica advances one replica's teardown; it returns what it waits
// for, or "" when the replica is gone. hostGone waives the host's release
// acknowledgement, and only for a replica whose removal from the Raft
// configuration committed (replacement.go) and whose host is gone: no Node,
// or its host's Lease absent or expired (liveness.go), never merely an
// unready host, which is alive and is asked. It holds no vote, so nothing
// it might still hold can be served.
func (r *Reconciler) releaseReplica(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, vr *storagev1alpha1.VolumeReplica, hostGone bool) (string, error) {
	if vr.DeletionTimestamp == nil {
		uid := vr.UID
		if err := r.client.Delete(ctx, vr, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("delete VolumeReplica %s (uid %s): %w", vr.Name, uid, err)
		}
		r.event(rv, eventNormal, EventReplicaClosing, "Delete", "replica %s deleted; waiting for the host on node %s to close its worker", vr.Name, vr.Spec.Node)
		return fmt.Sprintf("replica %s: waiting for the host on node %s to close its worker", vr.Name, vr.Spec.Node), nil
	}
	claim := &corev1.PersistentVolumeClaim{}
	err := r.reader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: vr.Spec.BackingClaimName}, claim)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", fmt.Errorf("read backing claim %s: %w", vr.Spec.BackingClaimName, err)
	case !ownedBy(claim, rv):
		// Not this volume's claim: never touched.
	default:
		_, removed := removedGeneration(vr)
		waived := hostGone && removed
		if needsAck(claim) && vr.Status.ReleasedClaimUID != string(claim.UID) && !waived {
			return fmt.Sprintf("replica %s: waiting for the host on node %s to acknowledge the release of claim %s (uid %s)",
				vr.Name, vr.Spec.Node, claim.Name, claim.UID), nil
		}
		if waived && vr.Status.ReleasedClaimUID != string(claim.UID) {
			r.log.Info("claim of a replica removed from membership reclaimed without its host's acknowledgement: the node is gone",
				"replica", vr.Name, "claim", claim.Name, "uid", claim.UID, "node", vr.Spec.Node)
		}
		if err := r.reclaim(ctx, claim); err != nil {
			return "", err
		}
		// The claim goes once kube-controller-manager lifts
		// kubernetes.io/pvc-protection; until then the replica stays, and
		// so does the volume, which must be the last of its objects to go.
		// The claim's removal reconciles the volume (it owns its claims).
		return fmt.Sprintf("replica %s: waiting for its backing claim %s to be removed", vr.Name, claim.Name), nil
	}
	svc := &corev1.Service{}
	if err := r.deleteOwned(ctx, rv, client.ObjectKey{Namespace: r.namespace, Name: vr.Name}, svc); err != nil {
		return "", err
	}
	if err := r.deleteSecret(ctx, rv, r.namespace, replicaSecretName(vr.Name)); err != nil {
		return "", err
	}
	if controllerutil.RemoveFinalizer(vr, storagev1alpha1.FinalizerReplicaRelease) {
		if err := r.client.Update(ctx, vr); err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("remove release finalizer of VolumeReplica %s: %w", vr.Name, err)
		}
	}
	return "", nil
}

// needsAck: the claim may be in use. A claim never bound and never
// protected by its host was never published, so nothing holds it.
func needsAck(c *corev1.PersistentVolumeClaim) bool {
	return c.Status.Phase == corev1.ClaimBound || controllerutil.ContainsFinalizer(c, storagev1alpha1.FinalizerBackingUse)
}

// reclaim removes the host's backing-use finalizer and requests the claim's
// normal deletion, bound to its UID.
func (r *Reconciler) reclaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if controllerutil.RemoveFinalizer(claim, storagev1alpha1.FinalizerBackingUse) {
		if err := r.client.Update(ctx, claim); err != nil {
			return fmt.Errorf("remove backing-use finalizer of claim %s: %w", claim.Name, err)
		}
	}
	if claim.DeletionTimestamp != nil {
		return nil
	}
	uid := claim.UID
	if err := r.client.Delete(ctx, claim, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete backing claim %s (uid %s): %w", claim.Name, uid, err)
	}
	return nil
}

func (r *Reconciler) deleteSecret(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, namespace, name string) error {
	return r.deleteOwned(ctx, rv, client.ObjectKey{Namespace: namespace, Name: name}, &corev1.Secret{})
}

// deleteOwned reads obj and deletes it, bound to its UID, when it is rv's.
func (r *Reconciler) deleteOwned(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, key client.ObjectKey, obj client.Object) error {
	err := r.reader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %T %s: %w", obj, key, err)
	}
	if !ownedBy(obj, rv) || obj.GetDeletionTimestamp() != nil {
		return nil
	}
	uid := obj.GetUID()
	if err := r.client.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %T %s (uid %s): %w", obj, key, uid, err)
	}
	return nil
}

// uncertain: the error says nothing definite about the object's state (a
// timeout, a lost connection, a server error), so storage stays preserved
// and the teardown retries.
func uncertain(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) || apierrors.IsUnexpectedServerError(err)
}
