package volume

// Orphaned volumes. CreateVolume records the ReplicatedVolume and then waits
// for a quorum; a claim deleted meanwhile makes the provisioner give up, and
// no PersistentVolume is ever created, so no DeleteVolume ever comes: the
// volume, its claims, Services, Secrets and replicas would stay for good.
// The controller collects such a volume itself, through the normal ordered
// teardown (deletion.go), when
//   - its source claim is gone, or a claim of that name has another UID than
//     the one the volume was created for, and
//   - no PersistentVolume of this driver holds the volume (a Retain PV keeps
//     its volume, bound or not), and
//   - both have held for the orphan grace period, counted from the
//     annotation the controller writes when it first sees it (the
//     provisioner may still be retrying, or creating the PV).
// Any read that fails leaves the volume alone: only a definite answer
// collects it, and the delete is bound to the volume's UID.

import (
	"context"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
)

// Orphan grace bounds: how long a volume may stay without its source claim
// and without a PersistentVolume before it is collected. The flag's minimum
// leaves the provisioner time to retry or create the PV; tests set the
// Option shorter.
const (
	DefaultOrphanGracePeriod = 5 * time.Minute
	MinOrphanGracePeriod     = time.Minute
)

// Events of the orphan collection.
const (
	EventSourceClaimGone  EventReason = "SourceClaimGone"
	EventOrphanCollected  EventReason = "OrphanCollected"
	EventSourceClaimFound EventReason = "SourceClaimFound"
)

// provisionerName matches the name csi-provisioner gives a volume by
// default (its PV name, `pvc-<claim uid>`, kept as the volume name by the
// CSI controller): the claim's UID is then part of the volume's identity.
var provisionerName = regexp.MustCompile(`^pvc-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)

// sourceUID is the UID of the claim the volume was made for, "" when not
// known yet.
func sourceUID(rv *storagev1alpha1.ReplicatedVolume) types.UID {
	if uid := rv.Annotations[storagev1alpha1.AnnotationSourceClaimUID]; uid != "" {
		return types.UID(uid)
	}
	if m := provisionerName.FindStringSubmatch(rv.Name); m != nil {
		return types.UID(m[1])
	}
	return ""
}

// collectOrphan keeps the orphan record of rv and deletes rv once its grace
// period is over. It returns whether rv was deleted, and when to look again
// while the grace period runs.
func (r *Reconciler) collectOrphan(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume) (bool, time.Duration, error) {
	why, err := r.orphaned(ctx, rv)
	if err != nil {
		return false, 0, err
	}
	_, marked := rv.Annotations[storagev1alpha1.AnnotationOrphanedSince]
	if why == "" {
		if marked {
			delete(rv.Annotations, storagev1alpha1.AnnotationOrphanedSince)
			if err := r.client.Update(ctx, rv); err != nil {
				return false, 0, fmt.Errorf("clear the orphan record of volume %s: %w", rv.Name, err)
			}
			r.event(rv, eventNormal, EventSourceClaimFound, "Collect", "source claim or PersistentVolume found again; the volume is kept")
		}
		return false, 0, nil
	}
	now := time.Now()
	since, perr := time.Parse(time.RFC3339, rv.Annotations[storagev1alpha1.AnnotationOrphanedSince])
	if !marked || perr != nil {
		since = now
		if rv.Annotations == nil {
			rv.Annotations = map[string]string{}
		}
		rv.Annotations[storagev1alpha1.AnnotationOrphanedSince] = now.UTC().Format(time.RFC3339)
		if err := r.client.Update(ctx, rv); err != nil {
			return false, 0, fmt.Errorf("record volume %s as orphaned: %w", rv.Name, err)
		}
		r.event(rv, eventWarning, EventSourceClaimGone, "Collect", "%s; the volume is deleted after --orphan-volume-grace=%s unless a PersistentVolume holds it",
			why, r.orphanGrace)
		r.log.Info("volume orphaned; grace period starts", "volume", rv.Name, "why", why, "grace", r.orphanGrace)
	}
	if left := r.orphanGrace - now.Sub(since); left > 0 {
		return false, left, nil
	}
	uid := rv.UID
	if err := r.client.Delete(ctx, rv, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return false, 0, fmt.Errorf("delete orphaned volume %s (uid %s): %w", rv.Name, uid, err)
	}
	r.event(rv, eventWarning, EventOrphanCollected, "Collect", "%s since %s and no PersistentVolume holds the volume: deleted; its replicas, claims, services and secrets are torn down in order",
		why, since.UTC().Format(time.RFC3339))
	r.log.Info("orphaned volume collected", "volume", rv.Name, "uid", uid, "why", why, "since", since)
	return true, 0, nil
}

// orphaned says why rv has no claim to serve ("" when it has one, or when a
// PersistentVolume holds it). The first sight of a source claim whose UID
// the volume's name does not carry records that UID.
func (r *Reconciler) orphaned(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume) (string, error) {
	src := rv.Spec.Source
	want := sourceUID(rv)
	claim := &corev1.PersistentVolumeClaim{}
	err := r.reader.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: src.Name}, claim)
	var why string
	switch {
	case apierrors.IsNotFound(err):
		why = fmt.Sprintf("source claim %s/%s is gone", src.Namespace, src.Name)
	case err != nil:
		return "", fmt.Errorf("read source claim %s/%s of volume %s: %w", src.Namespace, src.Name, rv.Name, err)
	case want == "":
		if rv.Annotations == nil {
			rv.Annotations = map[string]string{}
		}
		rv.Annotations[storagev1alpha1.AnnotationSourceClaimUID] = string(claim.UID)
		if err := r.client.Update(ctx, rv); err != nil {
			return "", fmt.Errorf("record the source claim's uid on volume %s: %w", rv.Name, err)
		}
		return "", nil
	case claim.UID != want:
		why = fmt.Sprintf("source claim %s/%s has uid %s, the volume was made for uid %s", src.Namespace, src.Name, claim.UID, want)
	default:
		return "", nil
	}
	pv, err := r.persistentVolumeOf(ctx, rv)
	if err != nil {
		return "", err
	}
	if pv != "" {
		return "", nil // a PV (Retain, or not yet reclaimed) keeps its volume
	}
	return why, nil
}

// persistentVolumeOf names a PersistentVolume of this driver whose volume
// handle is rv, "" when none exists. Listed around the cache: the manager
// watches no PersistentVolumes, and this runs only for a volume whose claim
// is gone.
func (r *Reconciler) persistentVolumeOf(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume) (string, error) {
	list := &corev1.PersistentVolumeList{}
	if err := r.reader.List(ctx, list); err != nil {
		return "", fmt.Errorf("list PersistentVolumes for volume %s: %w", rv.Name, err)
	}
	for i := range list.Items {
		if c := list.Items[i].Spec.CSI; c != nil && c.Driver == replicated.DriverName && c.VolumeHandle == rv.Name {
			return list.Items[i].Name, nil
		}
	}
	return "", nil
}
