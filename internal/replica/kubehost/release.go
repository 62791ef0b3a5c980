package kubehost

// Release (docs/volume-controller.md, "Deletion"): workers close before
// unpublication, and the manager waits for an identity-bound release
// acknowledgement. A VolumeReplica being deleted is held by the manager's
// replica-release finalizer; the host closes its worker, removes its
// EndpointSlice, asks the local driver to unpublish the backing volume
// (publish.go) and then acknowledges by writing the backing claim's UID into
// status.releasedClaimUID, with condition Released. The acknowledgement is
// written only after the worker is closed and the volume unpublished: the
// manager reclaims the claim as soon as it reads it.

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// hostedNames maps a VolumeReplica name to its worker key, so a replica
// that vanished from the API can still be stopped.
type hostedNames struct {
	mu   sync.Mutex
	keys map[string]string
}

func (a *Agent) remember(vr *storagev1alpha1.VolumeReplica) {
	a.hosted.mu.Lock()
	defer a.hosted.mu.Unlock()
	if a.hosted.keys == nil {
		a.hosted.keys = map[string]string{}
	}
	a.hosted.keys[vr.Namespace+"/"+vr.Name] = key(vr)
}

// stop closes the worker of a replica, if one runs.
func (a *Agent) stop(name, namespace string) {
	a.hosted.mu.Lock()
	k, ok := a.hosted.keys[namespace+"/"+name]
	delete(a.hosted.keys, namespace+"/"+name)
	a.hosted.mu.Unlock()
	if !ok {
		return
	}
	a.digest.forget(k)
	if err := a.host.Remove(k); err != nil {
		a.log.Debug("no worker to stop", "replica", name, "error", err)
		return
	}
	a.log.Info("worker closed", "replica", name, "key", k)
}

func (a *Agent) release(ctx context.Context, vr *storagev1alpha1.VolumeReplica) error {
	a.stop(vr.Name, vr.Namespace)
	a.digest.forget(key(vr))
	if _, _, still := a.host.Worker(key(vr)); still { // hosted by an earlier pass of this process
		if err := a.host.Remove(key(vr)); err != nil {
			return fmt.Errorf("close worker %s: %w", key(vr), err)
		}
	}
	if err := a.deleteSlice(ctx, vr.Namespace, vr.Name); err != nil {
		return err
	}
	claim := &corev1.PersistentVolumeClaim{}
	err := a.reader.Get(ctx, client.ObjectKey{Namespace: vr.Namespace, Name: vr.Spec.BackingClaimName}, claim)
	switch {
	case apierrors.IsNotFound(err):
		claim = nil
	case err != nil:
		return fmt.Errorf("read backing claim %s to acknowledge its release: %w", vr.Spec.BackingClaimName, err)
	case claim.Labels[storagev1alpha1.LabelReplica] != vr.Name:
		claim = nil // not this replica's: nothing of ours to acknowledge
	}
	// Workers close before unpublication, and the acknowledgement comes only
	// after it (docs/volume-controller.md, "Deletion"): the manager reclaims the
	// claim on reading it. An acknowledged release was unpublished before it was
	// acknowledged: later passes (until the manager removes the object) ask
	// nothing more.
	acknowledged := claim != nil && vr.Status.ReleasedClaimUID == string(claim.UID)
	if !acknowledged {
		if err := a.unpublish(ctx, vr, claim); err != nil {
			return a.reportUnpublishFailure(ctx, vr, err)
		}
	}
	next := vr.Status.DeepCopy()
	next.Role = storagev1alpha1.RoleStopped
	msg := "the worker is closed, its backing volume unpublished and its EndpointSlice removed"
	if claim != nil {
		next.ReleasedClaimUID = string(claim.UID)
		msg += "; claim " + claim.Name + " (uid " + string(claim.UID) + ") may be reclaimed"
	}
	meta.SetStatusCondition(&next.Conditions, *condition(storagev1alpha1.ReplicaReleased, true, storagev1alpha1.ReasonWorkerClosed, msg))
	meta.SetStatusCondition(&next.Conditions, *condition(storagev1alpha1.ReplicaReady, false, storagev1alpha1.ReasonWorkerClosed, "the replica is being deleted"))
	if vr.Status.ReleasedClaimUID != next.ReleasedClaimUID || meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaReleased.String()) == nil {
		cur := vr.DeepCopy()
		cur.Status = *next
		if err := a.client.Status().Update(ctx, cur); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("acknowledge the release of VolumeReplica %s: %w", vr.Name, err)
		}
		a.log.Info("release acknowledged", "replica", vr.Name, "claimUID", next.ReleasedClaimUID)
	}
	if err := a.creds.forget(vr.Name); err != nil {
		a.log.Warn("credentials of a released replica not removed", "replica", vr.Name, "error", err)
	}
	return nil
}
