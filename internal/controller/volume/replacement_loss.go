package volume

// Judging whether a replica is lost (docs/decisions/0006-replica-replacement.md,
// "Triggers"; docs/volume-controller.md, "Liveness"). A lost state or a lost
// backing claim is final at once; a gone host is only suspected, for the
// replacement delay, because a node that restarts comes back with its journal.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// loss is why a replica counts as lost, and when.
type loss struct {
	lost   bool          // replace it now
	why    string        // for messages
	waitIn time.Duration // > 0: the node is gone, replaced after this
}

// judge decides, for every member, whether it is lost, and keeps the
// unavailable-since annotations. recheck is when a live host's Lease runs
// out, the time to look again.
func (r *Reconciler) judge(ctx context.Context, set replicaSet) (map[string]loss, time.Duration, error) {
	out := map[string]loss{}
	now := time.Now()
	var recheck time.Duration
	for _, vr := range set {
		if !member(vr) {
			continue
		}
		if c := meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaStateLost.String()); c != nil && c.Status == "True" {
			out[vr.Name] = loss{lost: true, why: "it reports ReplicaStateLost: " + c.Reason}
			continue
		}
		if why, err := r.backingLost(ctx, vr); err != nil {
			return nil, 0, err
		} else if why != "" {
			out[vr.Name] = loss{lost: true, why: why}
			continue
		}
		host, err := r.hostOf(ctx, vr, now)
		if err != nil {
			return nil, 0, err
		}
		if err := r.markUnavailable(ctx, vr, host.gone, now); err != nil {
			return nil, 0, err
		}
		if host.gone == "" {
			recheck = soonest(recheck, recheckAfter(host, now))
			continue
		}
		first := unavailableSince(vr, now)
		if !host.since.IsZero() && host.since.Before(first) {
			first = host.since
		}
		if left := r.replacementDelay - now.Sub(first); left > 0 {
			out[vr.Name] = loss{why: host.gone + " since " + first.UTC().Format(time.RFC3339), waitIn: left}
		} else {
			out[vr.Name] = loss{lost: true, why: host.gone + " since " + first.UTC().Format(time.RFC3339)}
		}
	}
	return out, recheck, nil
}

// backingLost says why the replica's backing storage is gone, or "".
func (r *Reconciler) backingLost(ctx context.Context, vr *storagev1alpha1.VolumeReplica) (string, error) {
	claim := &corev1.PersistentVolumeClaim{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: vr.Spec.BackingClaimName}, claim)
	if apierrors.IsNotFound(err) {
		return "", nil // not created yet: the ensure loop creates it
	}
	if err != nil {
		return "", fmt.Errorf("read backing claim %s: %w", vr.Spec.BackingClaimName, err)
	}
	if claim.Status.Phase == corev1.ClaimLost {
		return fmt.Sprintf("its backing claim %s is Lost", claim.Name), nil
	}
	if claim.Spec.VolumeName == "" {
		return "", nil
	}
	err = r.reader.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, &corev1.PersistentVolume{})
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("the PersistentVolume %s of its backing claim %s is gone", claim.Spec.VolumeName, claim.Name), nil
	}
	if err != nil {
		return "", fmt.Errorf("read PersistentVolume %s of claim %s: %w", claim.Spec.VolumeName, claim.Name, err)
	}
	return "", nil
}

// unavailableSince is the time the annotation records, or now.
func unavailableSince(vr *storagev1alpha1.VolumeReplica, now time.Time) time.Time {
	if t, err := time.Parse(time.RFC3339, vr.Annotations[storagev1alpha1.AnnotationUnavailableSince]); err == nil {
		return t
	}
	return now
}

// markUnavailable writes or removes the unavailable-since annotation.
func (r *Reconciler) markUnavailable(ctx context.Context, vr *storagev1alpha1.VolumeReplica, gone string, now time.Time) error {
	_, has := vr.Annotations[storagev1alpha1.AnnotationUnavailableSince]
	if (gone != "") == has {
		return nil
	}
	orig := vr.DeepCopy()
	if gone != "" {
		if vr.Annotations == nil {
			vr.Annotations = map[string]string{}
		}
		vr.Annotations[storagev1alpha1.AnnotationUnavailableSince] = now.UTC().Format(time.RFC3339)
		r.log.Info("replica unavailable; replacement delay starts", "replica", vr.Name, "why", gone, "delay", r.replacementDelay)
	} else {
		delete(vr.Annotations, storagev1alpha1.AnnotationUnavailableSince)
	}
	if err := r.client.Patch(ctx, vr, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("record the availability of VolumeReplica %s: %w", vr.Name, err)
	}
	return nil
}
