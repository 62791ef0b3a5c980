package fleet

// Status is written by one function, writeStatus, rebuilt from what the
// cluster reports and what this reconcile's gates found. It is never an input
// to a decision, with one exception: status.members, the per-member record
// of what the cluster forgets when a Pod is recreated (memberrecord.go). Each
// condition says one independent thing.

import (
	"context"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// report is what one reconcile's gates found.
type report struct {
	obs             *observation
	blocked         *finding
	uncertain       *finding // CapacityUncertain: reported, but the reconcile goes on
	progressReason  celldv1alpha1.ConditionReason
	progressMessage string
	deleteReason    celldv1alpha1.ConditionReason
	deleteMessage   string
	unschedulable   []string
	overdue         string                       // an unschedulable member past the replacement delay
	revisionWait    *revisionWait                // a member never Ready on its revision, past the delay
	members         []celldv1alpha1.MemberStatus // status.members, rebuilt by trackMembers
	replaced        string                       // the member replaced in this reconcile
	requeue         time.Duration
	gone            bool        // the fleet's finalizer was removed
	healing         *healReport // nil when self-healing did not run
}

// healReport is what self-healing did or waits on: the Healing condition.
type healReport struct {
	active  bool // a member is being healed
	reason  celldv1alpha1.ConditionReason
	message string
}

// healed reports that self-healing acted on a member.
func (rep *report) healed(reason celldv1alpha1.ConditionReason, format string, args ...any) {
	rep.healing = &healReport{active: true, reason: reason, message: fmt.Sprintf(format, args...)}
}

// healWaits reports why self-healing leaves a down member alone for now,
// unless it already acted in this reconcile.
func (rep *report) healWaits(reason celldv1alpha1.ConditionReason, format string, args ...any) {
	if rep.healing != nil && rep.healing.active {
		return
	}
	rep.healing = &healReport{reason: reason, message: fmt.Sprintf(format, args...)}
}

func (rep *report) progress(reason celldv1alpha1.ConditionReason, format string, args ...any) {
	rep.progressReason, rep.progressMessage = reason, fmt.Sprintf(format, args...)
}

func (rep *report) deleting(reason celldv1alpha1.ConditionReason, format string, args ...any) {
	rep.deleteReason, rep.deleteMessage = reason, fmt.Sprintf(format, args...)
}

func (rep *report) requeueSoon() {
	if rep.requeue == 0 || rep.requeue > inFlightRequeue {
		rep.requeue = inFlightRequeue
	}
}

// blockedFinding is the Blocked verdict, MemberUnschedulable included.
func (rep *report) blockedFinding(delay time.Duration) *finding {
	if rep.blocked != nil {
		return rep.blocked
	}
	if rep.uncertain != nil {
		return rep.uncertain
	}
	if rep.overdue != "" && rep.overdue != rep.replaced {
		return blocked(celldv1alpha1.ReasonMemberUnschedulable,
			"member %s has found no node for %s and has not been replaced; check the zone of its disk and the capacity of that zone", rep.overdue, delay)
	}
	if w := rep.revisionWait; w != nil {
		return blocked(celldv1alpha1.ReasonRevisionNotReady,
			"member %s has not become Ready on revision %s within %s, after it was Ready on revision %s; its disk is kept. Fix that revision's image or configuration, or roll back",
			w.member, w.revision, delay, w.readyRevision)
	}
	return nil
}

// workloadCounts are the replica counts the workload reports.
type workloadCounts struct{ applied, replicas, ready, updated int32 }

func counts(obs *observation) workloadCounts {
	var c workloadCounts
	if obs == nil {
		return c
	}
	c.applied = obs.applied()
	switch {
	case obs.sts != nil:
		s := obs.sts.Status
		c.replicas, c.ready, c.updated = s.Replicas, s.ReadyReplicas, s.UpdatedReplicas
	case obs.deploy != nil:
		s := obs.deploy.Status
		c.replicas, c.ready, c.updated = s.Replicas, s.ReadyReplicas, s.UpdatedReplicas
	}
	return c
}

// condition is one condition as of now (the operator's clock, so blocked
// age and transition times follow the same clock as every other decision).
func condition(t celldv1alpha1.ConditionType, ok bool, reason celldv1alpha1.ConditionReason, msg string, gen int64, now time.Time) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(t), Status: s, Reason: string(reason), Message: msg, ObservedGeneration: gen,
		LastTransitionTime: metav1.NewTime(now)}
}

// desiredStatus derives the fleet's status.
func (r *Reconciler) desiredStatus(f *celldv1alpha1.CelldFleet, rep *report) celldv1alpha1.CelldFleetStatus {
	c := counts(rep.obs)
	gen := f.Generation
	st := celldv1alpha1.CelldFleetStatus{
		ObservedGeneration: gen, DesiredReplicas: f.Spec.Replicas, AppliedReplicas: c.applied,
		Replicas: c.replicas, ReadyReplicas: c.ready, UpdatedReplicas: c.updated,
		Selector:             labels.SelectorFromSet(selectorLabels(f)).String(),
		UnschedulableMembers: rep.unschedulable,
		Members:              rep.members,
		Conditions:           append([]metav1.Condition(nil), f.Status.Conditions...),
	}
	ready := c.ready >= f.Spec.Replicas && c.applied == f.Spec.Replicas
	readyReason := celldv1alpha1.ReasonMembersReady
	if !ready {
		readyReason = celldv1alpha1.ReasonMembersNotReady
	}
	now := r.clock.Now()
	set := func(cond metav1.Condition) { meta.SetStatusCondition(&st.Conditions, cond) }
	set(condition(celldv1alpha1.ConditionReady, ready, readyReason,
		fmt.Sprintf("%d of %d members Ready", c.ready, f.Spec.Replicas), gen, now))

	progressReason, progressMsg := rep.progressReason, rep.progressMessage
	if progressReason == "" {
		progressReason, progressMsg = r.derivedProgress(f, c)
	}
	set(condition(celldv1alpha1.ConditionProgressing, progressReason != celldv1alpha1.ReasonConverged, progressReason, progressMsg, gen, now))

	if b := rep.blockedFinding(r.delay); b != nil {
		set(condition(celldv1alpha1.ConditionBlocked, true, b.reason, b.message, gen, now))
	} else {
		set(condition(celldv1alpha1.ConditionBlocked, false, celldv1alpha1.ReasonNotBlocked, "nothing stops the operator", gen, now))
	}
	if paused(f) {
		set(condition(celldv1alpha1.ConditionMaintenancePaused, true, celldv1alpha1.ReasonPaused,
			"spec.maintenance.paused is set: the workload is frozen and no member is replaced", gen, now))
	} else {
		set(condition(celldv1alpha1.ConditionMaintenancePaused, false, celldv1alpha1.ReasonNotPaused, "the operator manages the workload", gen, now))
	}
	h := rep.healing
	switch {
	case h != nil:
	case paused(f):
		h = &healReport{reason: celldv1alpha1.ReasonHealingNotApplicable, message: "the fleet is paused: no member is healed"}
	default:
		h = &healReport{reason: celldv1alpha1.ReasonHealingNotApplicable, message: "the fleet has no StatefulSet of its own whose members could be healed"}
	}
	set(condition(celldv1alpha1.ConditionHealing, h.active, h.reason, h.message, gen, now))
	if rep.deleteReason != "" {
		set(condition(celldv1alpha1.ConditionDeleting, true, rep.deleteReason, rep.deleteMessage, gen, now))
	} else {
		set(condition(celldv1alpha1.ConditionDeleting, false, celldv1alpha1.ReasonNotDeleting, "the fleet is not being deleted", gen, now))
	}
	if b := meta.FindStatusCondition(st.Conditions, string(celldv1alpha1.ConditionBlocked)); b.Status == metav1.ConditionTrue {
		since := b.LastTransitionTime
		st.BlockedSince = &since
	}
	return st
}

// derivedProgress reads the workload's own state when no gate reported.
func (r *Reconciler) derivedProgress(f *celldv1alpha1.CelldFleet, c workloadCounts) (celldv1alpha1.ConditionReason, string) {
	switch {
	case c.applied < f.Spec.Replicas:
		return celldv1alpha1.ReasonGrowing, fmt.Sprintf("%d of %d members applied", c.applied, f.Spec.Replicas)
	case c.applied > f.Spec.Replicas:
		return celldv1alpha1.ReasonContracting, fmt.Sprintf("%d members applied, contracting to %d", c.applied, f.Spec.Replicas)
	case c.updated < c.applied || c.replicas != c.applied:
		return celldv1alpha1.ReasonRollingOut, fmt.Sprintf("%d of %d members on the current template", c.updated, c.applied)
	}
	return celldv1alpha1.ReasonConverged, "the workload matches the spec"
}

// writeStatus is the one function that writes a fleet's status. It writes
// only when something changed, and retries a conflict from a fresh read.
func (r *Reconciler) writeStatus(ctx context.Context, f *celldv1alpha1.CelldFleet, rep *report) error {
	if rep.gone {
		return nil
	}
	want := r.desiredStatus(f, rep)
	r.metrics.observe(f, want, rep.obs, r.clock.Now())
	r.announceBlocked(f, want)
	r.announceDeletionPhase(f, want)
	if reflect.DeepEqual(normalizeTimes(f.Status), normalizeTimes(want)) {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &celldv1alpha1.CelldFleet{}
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(f), fresh); err != nil {
			return err
		}
		if fresh.Generation != f.Generation {
			return nil // a newer spec: the next reconcile reports on it
		}
		fresh.Status = want
		return r.client.Status().Update(ctx, fresh)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("write fleet status: %w", err)
	}
	return nil
}

// normalizeTimes drops sub-second precision the API server does not keep.
func normalizeTimes(s celldv1alpha1.CelldFleetStatus) celldv1alpha1.CelldFleetStatus {
	out := *s.DeepCopy()
	for i := range out.Conditions {
		out.Conditions[i].LastTransitionTime = metav1.NewTime(out.Conditions[i].LastTransitionTime.Truncate(time.Second))
	}
	if out.BlockedSince != nil {
		t := metav1.NewTime(out.BlockedSince.Truncate(time.Second))
		out.BlockedSince = &t
	}
	if len(out.UnschedulableMembers) == 0 {
		out.UnschedulableMembers = nil
	}
	for i := range out.Members {
		if t := out.Members[i].DownSince; t != nil {
			out.Members[i].DownSince = &metav1.Time{Time: t.Truncate(time.Second)}
		}
		if t := out.Members[i].ReplacementDue; t != nil {
			out.Members[i].ReplacementDue = &metav1.Time{Time: t.Truncate(time.Second)}
		}
	}
	if len(out.Members) == 0 {
		out.Members = nil
	}
	return out
}

// announceDeletionPhase records an event when a deleted fleet enters a
// deletion phase (Deleting's reason changes to DeletingCompute or
// DeletingDisks).
func (r *Reconciler) announceDeletionPhase(f *celldv1alpha1.CelldFleet, want celldv1alpha1.CelldFleetStatus) {
	before := meta.FindStatusCondition(f.Status.Conditions, string(celldv1alpha1.ConditionDeleting))
	after := meta.FindStatusCondition(want.Conditions, string(celldv1alpha1.ConditionDeleting))
	if after.Status != metav1.ConditionTrue || (before != nil && before.Reason == after.Reason) {
		return
	}
	reason := eventDeletingCompute
	if after.Reason == string(celldv1alpha1.ReasonDeletingDisks) {
		reason = eventDeletingDisks
	}
	r.event(f, corev1.EventTypeNormal, reason, "Delete", "%s", after.Message)
}

// announceBlocked records an event when Blocked changes.
func (r *Reconciler) announceBlocked(f *celldv1alpha1.CelldFleet, want celldv1alpha1.CelldFleetStatus) {
	before := meta.FindStatusCondition(f.Status.Conditions, string(celldv1alpha1.ConditionBlocked))
	after := meta.FindStatusCondition(want.Conditions, string(celldv1alpha1.ConditionBlocked))
	if before != nil && before.Status == after.Status && before.Reason == after.Reason {
		return
	}
	if after.Status == metav1.ConditionTrue {
		r.event(f, corev1.EventTypeWarning, eventBlocked, "Reconcile", "%s: %s", after.Reason, after.Message)
	} else if before != nil {
		r.event(f, corev1.EventTypeNormal, eventUnblocked, "Reconcile", "no longer blocked")
	}
}
