package fleet

// The replacement handoff (docs/fleet-operator.md, "The replacement handoff").
// A Pod read and a claim delete are separate API operations, so rereading the
// Pod before deleting its claim cannot close the race: the Pod can recover
// after the read, or a new Pod can take its name. The Pod delete is the
// commitment point instead:
//
//  1. prepare: the selected, non-terminating Pod gets the operator's finalizer,
//     the record (fleet UID, the controlling StatefulSet's UID, original claim
//     UID and resourceVersion) and the private replacement-fleet index label,
//     written against the Pod and claim as they were observed when the
//     member was selected, so a recovery since then conflicts;
//  2. delete that exact Pod with UID and resourceVersion preconditions; a
//     recovery or metadata change in between makes it conflict, and the disk
//     is kept. The finalizer holds the terminating Pod's name, so the
//     StatefulSet cannot create a successor against the old claim;
//  3. only an acknowledged delete lets the record be marked committed; any
//     failed delete (its reply may have been lost) aborts and releases;
//  4. a committed record deletes only the recorded claim, with UID and
//     resourceVersion preconditions; a claim whose meaning changed is kept,
//     while a change to the control plane's bookkeeping alone (Kubernetes
//     1.37 marks a claim Unused once its Pod is gone) is retried at the new
//     resourceVersion (docs/decisions/0002-handoff-claim-bookkeeping.md);
//  5. once that deletion is accepted, or the claim UID is gone, the hold
//     (finalizer, record, label) is released, without waiting for the claim
//     to disappear: PVC protection needs the old Pod gone first.
//
// settleHolds runs first in every reconcile: a prepared record found there
// was interrupted and always aborts, keeping the disk; a committed one
// resumes. Drift of the fleet label or owner, a pause, or fleet deletion
// release the hold without starting another disk delete.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

type handoffPhase string

const (
	phasePrepared  handoffPhase = "Prepared"
	phaseCommitted handoffPhase = "Committed"
)

// replacementCause says why a member's disk is replaced.
type replacementCause string

const (
	causeVolumeLost replacementCause = "VolumeLost"
	causeMemberDown replacementCause = "MemberDown"
)

// handoffRecord is the annotation on the victim Pod.
type handoffRecord struct {
	FleetUID types.UID `json:"fleetUID"`
	// OwnerUID is the controller (the StatefulSet) of the Pod when it was
	// prepared: an owner reference that changed since is drift.
	OwnerUID             types.UID `json:"ownerUID"`
	ClaimName            string    `json:"claimName"`
	ClaimUID             types.UID `json:"claimUID"`
	ClaimResourceVersion string    `json:"claimResourceVersion"`
	// ClaimFingerprint digests what the claim means (see claimFingerprint),
	// so a change the control plane makes to its bookkeeping alone is told
	// apart from a change that retains the disk.
	ClaimFingerprint string           `json:"claimFingerprint,omitempty"`
	Phase            handoffPhase     `json:"phase"`
	Cause            replacementCause `json:"cause"`
}

func readRecord(p *corev1.Pod) (handoffRecord, bool) {
	var rec handoffRecord
	raw, ok := p.Annotations[celldv1alpha1.AnnotationReplacement]
	if !ok || json.Unmarshal([]byte(raw), &rec) != nil {
		return handoffRecord{}, false
	}
	return rec, true
}

func writeRecord(p *corev1.Pod, rec handoffRecord) {
	b, _ := json.Marshal(rec) // a record always encodes
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[celldv1alpha1.AnnotationReplacement] = string(b)
}

// errHandoffAborted says the Pod changed before the commitment point; the
// disk is kept.
var errHandoffAborted = errors.New("replacement aborted before the commitment point; the disk is kept")

// replaceMember runs the handoff for one member Pod and its claim, exactly as
// the reconcile observed them: the prepare write carries the observed Pod's
// resourceVersion and the record names the observed claim's UID and
// resourceVersion, so a recovery (or any change) after the decision was made
// conflicts and keeps the disk. Rereading either object here would let a
// stale decision act on a fresh object.
func (r *Reconciler) replaceMember(ctx context.Context, f *celldv1alpha1.CelldFleet, selected *corev1.Pod,
	claim *corev1.PersistentVolumeClaim, cause replacementCause,
) error {
	log := r.log.With("fleet", f.Name, "namespace", f.Namespace, "member", selected.Name, "cause", cause)
	owner := metav1.GetControllerOf(selected)
	switch {
	case terminating(selected) || owner == nil:
		return fmt.Errorf("member %s is terminating or has no owner: %w", selected.Name, errHandoffAborted)
	case claim.Labels[celldv1alpha1.LabelFleetUID] != string(f.UID) || claim.DeletionTimestamp != nil:
		return fmt.Errorf("claim %s is not this fleet's live claim: %w", claim.Name, errHandoffAborted)
	}

	// 1. prepare
	pod := selected.DeepCopy()
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[celldv1alpha1.LabelReplacementFleet] = string(f.UID)
	controllerutil.AddFinalizer(pod, celldv1alpha1.FinalizerReplacement)
	rec := handoffRecord{FleetUID: f.UID, OwnerUID: owner.UID, ClaimName: claim.Name, ClaimUID: claim.UID,
		ClaimResourceVersion: claim.ResourceVersion, ClaimFingerprint: claimFingerprint(claim),
		Phase: phasePrepared, Cause: cause}
	writeRecord(pod, rec)
	if err := r.client.Update(ctx, pod); err != nil {
		if apierrors.IsConflict(err) {
			r.abortedHandoff(f, "member %s changed since it was selected for replacement; its disk %s is kept", pod.Name, claim.Name)
			return fmt.Errorf("member %s changed since it was selected: %w", selected.Name, errHandoffAborted)
		}
		return fmt.Errorf("prepare replacement of %s: %w", pod.Name, err)
	}
	log.Info("prepared member replacement", "claim", claim.Name, "claimUID", claim.UID)
	r.event(f, corev1.EventTypeNormal, eventReplacementPrepared, "Replace",
		"prepared the replacement of member %s (%s): its Pod is held and its disk %s recorded", pod.Name, cause, claim.Name)

	// 2. the commitment point. Any failure, a conflict (the member recovered
	// or its metadata changed) or an error whose reply may have been lost
	// alike, aborts: only an acknowledged delete commits.
	uid, rv := pod.UID, pod.ResourceVersion
	if err := r.client.Delete(ctx, pod, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
		changed := apierrors.IsConflict(err) || apierrors.IsNotFound(err)
		if changed {
			r.abortedHandoff(f, "member %s changed before its Pod was deleted; its disk %s is kept", pod.Name, claim.Name)
		} else {
			r.abortedHandoff(f, "the delete of member %s's Pod failed (its reply may have been lost); its disk %s is kept", pod.Name, claim.Name)
		}
		if rerr := r.releaseHold(ctx, f, pod); rerr != nil {
			return errors.Join(fmt.Errorf("delete member %s (commitment point): %w", pod.Name, err), rerr)
		}
		if changed {
			return fmt.Errorf("member %s changed before the commitment point: %w", pod.Name, errHandoffAborted)
		}
		return fmt.Errorf("delete member %s (commitment point; aborted, disk kept): %w", pod.Name, err)
	}

	// 3. acknowledged: mark committed
	if err := r.updatePod(ctx, pod, func(p *corev1.Pod) bool {
		cur, ok := readRecord(p)
		if !ok || cur.Phase != phasePrepared || cur.ClaimUID != rec.ClaimUID {
			return false
		}
		cur.Phase = phaseCommitted
		writeRecord(p, cur)
		return true
	}); err != nil {
		return fmt.Errorf("commit replacement of %s: %w", pod.Name, err)
	}
	r.metrics.countReplacement(f)
	r.event(f, corev1.EventTypeWarning, eventMemberReplaced, "Replace",
		"committed: member %s is replaced on a fresh disk (%s); its claim %s is deleted", pod.Name, cause, claim.Name)
	committed := &corev1.Pod{}
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(pod), committed); err != nil {
		return fmt.Errorf("reread committed member %s: %w", pod.Name, err)
	}
	if cur, ok := readRecord(committed); !ok || cur.Phase != phaseCommitted || committed.UID != pod.UID {
		return nil // someone else settled the hold; the next reconcile looks again
	}
	return r.finishCommitted(ctx, f, committed)
}

// settleHolds aborts prepared records and resumes committed ones, for every
// Pod the private index names, inside or outside the replica range.
// releaseOnly (pause, fleet deletion) releases without any disk delete.
func (r *Reconciler) settleHolds(ctx context.Context, f *celldv1alpha1.CelldFleet, releaseOnly bool) error {
	var held corev1.PodList
	if err := r.reader.List(ctx, &held, client.InNamespace(f.Namespace),
		client.MatchingLabels{celldv1alpha1.LabelReplacementFleet: string(f.UID)}); err != nil {
		return fmt.Errorf("list replacement holds: %w", err)
	}
	var errs []error
	for i := range held.Items {
		p := &held.Items[i]
		rec, ok := readRecord(p)
		if why := abortCause(ok, releaseOnly, rec, r.drifted(f, p, rec)); why != "" {
			r.abortedHandoff(f, "the replacement of member %s is aborted (%s); no disk is deleted", p.Name, why)
			errs = append(errs, r.releaseHold(ctx, f, p))
			continue
		}
		errs = append(errs, r.finishCommitted(ctx, f, p))
	}
	// A hold that could not be settled stays in progress: the gauge shows
	// it even while the error stops this reconcile before status.
	unsettled := 0
	for _, err := range errs {
		if err != nil {
			unsettled++
		}
	}
	r.metrics.setHolds(f, unsettled)
	return errors.Join(errs...)
}

// abortCause says why a hold found by settleHolds is released without any
// disk delete, "" when its committed record resumes.
func abortCause(readable, releaseOnly bool, rec handoffRecord, drifted bool) string {
	switch {
	case !readable:
		return "its record is unreadable"
	case releaseOnly:
		return "the fleet is paused or deleted"
	case rec.Phase != phaseCommitted:
		return "it was interrupted before its commitment point"
	case drifted:
		return "the Pod's fleet label or owner changed since it was prepared"
	}
	return ""
}

// abortedHandoff records an aborted replacement: its event and its count.
func (r *Reconciler) abortedHandoff(f *celldv1alpha1.CelldFleet, format string, args ...any) {
	r.metrics.countAbortedHandoff(f)
	r.event(f, corev1.EventTypeNormal, eventReplacementAborted, "Replace", format, args...)
}

// drifted says the held Pod no longer belongs to this fleet's StatefulSet as
// it did when prepared: the hold is released and no disk is deleted.
func (r *Reconciler) drifted(f *celldv1alpha1.CelldFleet, p *corev1.Pod, rec handoffRecord) bool {
	owner := metav1.GetControllerOf(p)
	labelDrift := rec.FleetUID != f.UID || p.Labels[celldv1alpha1.LabelFleet] != f.Name
	ownerDrift := owner == nil || owner.Kind != "StatefulSet" || owner.Name != workloadName(f) || owner.UID != rec.OwnerUID
	return labelDrift || ownerDrift
}

// finishCommitted deletes the recorded claim, only it, with UID and
// resourceVersion preconditions, then releases the hold.
func (r *Reconciler) finishCommitted(ctx context.Context, f *celldv1alpha1.CelldFleet, p *corev1.Pod) error {
	rec, _ := readRecord(p)
	claim := &corev1.PersistentVolumeClaim{}
	err := r.reader.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: rec.ClaimName}, claim)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && claim.UID != rec.ClaimUID):
		// The recorded claim is gone; a claim at its name with another UID is
		// never deleted.
	case err == nil && claim.DeletionTimestamp != nil:
		// Its deletion was durably accepted (perhaps by a write whose reply
		// was lost); PVC protection finishes it once the old Pod is gone.
	case err != nil:
		return fmt.Errorf("read recorded claim %s: %w", rec.ClaimName, err)
	default:
		err := r.deleteRecordedClaim(ctx, claim, rec)
		switch {
		case err == nil:
			r.log.Info("deleted replaced member's claim", "fleet", f.Name, "namespace", f.Namespace, "member", p.Name, "claim", rec.ClaimName)
		case apierrors.IsNotFound(err):
		case errors.Is(err, errClaimChanged):
			r.abortedHandoff(f, "claim %s changed since the replacement was prepared; it is kept", rec.ClaimName)
		default:
			return fmt.Errorf("delete recorded claim %s: %w", rec.ClaimName, err)
		}
	}
	return r.releaseHold(ctx, f, p)
}

// errClaimChanged says the recorded claim changed in meaning since the
// handoff was prepared, so it is retained (docs/fleet-operator.md, "The
// replacement handoff").
var errClaimChanged = errors.New("claim changed since the replacement was prepared")

// bookkeepingRetries bounds how often a claim delete is retried against
// bookkeeping-only changes before the reconcile gives up and requeues (the
// committed record resumes then).
const bookkeepingRetries = 3

// deleteRecordedClaim deletes the recorded claim with UID and resourceVersion
// preconditions. The first attempt uses the resourceVersion recorded at
// preparation (docs/fleet-operator.md, "The replacement handoff"). Kubernetes
// 1.37's PVC protection controller then writes an Unused status condition as
// soon as no Pod references the claim, which the handoff's own Pod delete
// causes, so that first attempt conflicts in every real cluster. On a conflict
// the claim is reread: if what it means (claimFingerprint) is unchanged, the
// change was the control plane's bookkeeping and the delete is retried at the
// new resourceVersion, still bound by both preconditions; any other change
// retains the claim.
func (r *Reconciler) deleteRecordedClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, rec handoffRecord) error {
	uid, rv := rec.ClaimUID, rec.ClaimResourceVersion
	for attempt := 0; ; attempt++ {
		err := r.client.Delete(ctx, claim, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh := &corev1.PersistentVolumeClaim{}
		if gerr := r.reader.Get(ctx, client.ObjectKeyFromObject(claim), fresh); gerr != nil {
			return fmt.Errorf("reread claim %s after a conflict: %w", claim.Name, gerr)
		}
		switch {
		case fresh.UID != rec.ClaimUID || fresh.DeletionTimestamp != nil:
			return nil // gone, replaced by another, or its deletion already accepted
		case rec.ClaimFingerprint == "" || claimFingerprint(fresh) != rec.ClaimFingerprint:
			return fmt.Errorf("%s: %w", claim.Name, errClaimChanged)
		case attempt+1 >= bookkeepingRetries:
			return fmt.Errorf("claim %s keeps changing its status; retrying later: %w", claim.Name, err)
		}
		rv = fresh.ResourceVersion
	}
}

// claimFingerprint digests what a claim means for the handoff: its identity,
// spec (the bound volume among it), labels, annotations, owners and finalizers,
// and its phase, capacity and access modes. A Lost claim whose volume
// returns (phase Bound again), a rebind, or anyone's annotation change all
// alter it. Status conditions are left out: the control plane rewrites them
// as Pods come and go (Unused) and during resizes, which follow spec edits
// that are covered anyway.
func claimFingerprint(c *corev1.PersistentVolumeClaim) string {
	b, _ := json.Marshal(struct {
		UID         types.UID
		Spec        corev1.PersistentVolumeClaimSpec
		Labels      map[string]string
		Annotations map[string]string
		Owners      []metav1.OwnerReference
		Finalizers  []string
		Phase       corev1.PersistentVolumeClaimPhase
		Capacity    corev1.ResourceList
		AccessModes []corev1.PersistentVolumeAccessMode
	}{c.UID, c.Spec, c.Labels, c.Annotations, c.OwnerReferences, c.Finalizers, c.Status.Phase,
		c.Status.Capacity, c.Status.AccessModes}) // these types always encode
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// releaseHold removes the operator's finalizer, record and index label, and
// records the release once, when it writes.
func (r *Reconciler) releaseHold(ctx context.Context, f *celldv1alpha1.CelldFleet, p *corev1.Pod) error {
	released := false
	err := r.updatePod(ctx, p, func(fresh *corev1.Pod) bool {
		released = false // a retry after a conflict decides afresh
		_, labelled := fresh.Labels[celldv1alpha1.LabelReplacementFleet]
		_, recorded := fresh.Annotations[celldv1alpha1.AnnotationReplacement]
		if !labelled && !recorded && !controllerutil.ContainsFinalizer(fresh, celldv1alpha1.FinalizerReplacement) {
			return false
		}
		delete(fresh.Labels, celldv1alpha1.LabelReplacementFleet)
		delete(fresh.Annotations, celldv1alpha1.AnnotationReplacement)
		controllerutil.RemoveFinalizer(fresh, celldv1alpha1.FinalizerReplacement)
		released = true
		return true
	})
	if err != nil {
		return fmt.Errorf("release replacement hold on %s: %w", p.Name, err)
	}
	if released {
		r.event(f, corev1.EventTypeNormal, eventReplacementReleased, "Replace",
			"released the replacement hold on member %s (finalizer, record and index label)", p.Name)
	}
	return nil
}

// updatePod applies change to a fresh read of the Pod (same UID) and writes
// it, retrying conflicts from a fresh read. change returns false for no write.
func (r *Reconciler) updatePod(ctx context.Context, p *corev1.Pod, change func(*corev1.Pod) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &corev1.Pod{}
		if err := r.reader.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		if fresh.UID != p.UID || !change(fresh) {
			return nil
		}
		return r.client.Update(ctx, fresh)
	})
}
