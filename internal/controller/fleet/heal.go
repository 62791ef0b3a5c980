package fleet

// Self-healing of PersistentFleet members (docs/fleet-operator.md,
// "Self-healing"). At most one member is replaced at a time, and only where a
// fresh disk cannot take the zone another member's disk needs: the StatefulSet
// already runs and has observed the operator's spec, and the scheduler has
// placed, or found no node for, every other member's Pod.
//
//   - A lost volume (claim phase Lost) is replaced through the handoff.
//   - A member down for the replacement delay, while every other member has
//     been Ready for five minutes, is replaced on a fresh disk. The delay is
//     patience, not the safety condition, and is timed from the member's
//     first down moment with no Ready period since, across its Pods
//     (memberrecord.go). Not replaced: a member waiting on its image or
//     configuration (a Pod held by a scheduling gate among them, and a member
//     never Ready on its current revision after it was Ready on an earlier
//     one), a member on a disk created for its current Pod that has never
//     served it (markServed), and any member while two are down (either may
//     hold the only copy of some writes) unless their volumes are Lost.
//   - A member never Ready on its current revision for the replacement delay
//     makes the fleet report Blocked with reason RevisionNotReady, naming the
//     revision: only a fixed or rolled-back template brings it back.
//   - A member the scheduler cannot place is named in status; if it is still
//     not placed, and not replaced, by the end of the delay the fleet reports
//     Blocked with reason MemberUnschedulable.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func (r *Reconciler) heal(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation, rep *report) error {
	applied := obs.applied()
	if err := r.markServed(ctx, f, obs, applied); err != nil {
		return err
	}
	r.noteUnschedulable(f, obs, applied, rep)
	r.noteRevisionNotReady(obs, applied, rep)
	if holdInProgress(obs) {
		rep.healed(celldv1alpha1.ReasonReplacingMember, "a member replacement is in progress (%s)", heldMember(obs))
		return nil
	}
	if m, ok := r.lostVolumeMember(f, obs, applied); ok {
		if !freshDiskMayGo(f, obs, applied, m, rep) {
			rep.requeueSoon()
			rep.healWaits(celldv1alpha1.ReasonReplacementWaitingOnScheduler,
				"the claim of member %s is Lost; its fresh disk waits until the StatefulSet has observed its spec and the scheduler has placed, or found no node for, every other member's Pod", m.Name)
			return nil
		}
		r.event(f, corev1.EventTypeWarning, eventDiskLost, "Replace", "claim of member %s is Lost: its volume no longer exists", m.Name)
		return r.replace(ctx, f, obs, m, causeVolumeLost, rep)
	}
	if m, ok := r.memberThatCannotComeBack(f, obs, applied, rep); ok {
		return r.replace(ctx, f, obs, m, causeMemberDown, rep)
	}
	return nil
}

func (r *Reconciler) replace(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation, m *corev1.Pod, cause replacementCause, rep *report) error {
	rep.healed(celldv1alpha1.ReasonReplacingMember, "replacing member %s on a fresh disk (%s)", m.Name, cause)
	rep.requeueSoon()
	n, _ := ordinalOf(f, m.Name)
	claim, ok := obs.claims[claimName(f, n)]
	if !ok {
		return nil // no disk to replace: the StatefulSet makes one
	}
	if err := r.replaceMember(ctx, f, m, claim, cause); err != nil {
		if !errors.Is(err, errHandoffAborted) {
			return err
		}
		r.log.Info("member replacement aborted; its disk is kept", "fleet", f.Name, "namespace", f.Namespace, "member", m.Name, "err", err)
		return nil
	}
	rep.replaced = m.Name
	return nil
}

// holdInProgress says some member Pod still carries a replacement hold.
func holdInProgress(obs *observation) bool { return heldMember(obs) != "" }

// heldMember names a member Pod that carries a replacement hold, "" if none.
func heldMember(obs *observation) string {
	for _, p := range obs.members {
		if controllerutil.ContainsFinalizer(p, celldv1alpha1.FinalizerReplacement) {
			return p.Name
		}
	}
	return ""
}

// freshDiskMayGo is the placement rule for member m (docs/fleet-operator.md,
// "Where a fresh disk goes"): the StatefulSet runs and has observed the
// operator's spec, so no rollout is about to recreate another member, and the
// scheduler has decided every other member's Pod. A rollout is about to start
// when the operator would write a new template; it writes none while a workload
// gate holds the fleet Blocked, so then the StatefulSet's own template is the
// one that stays.
func freshDiskMayGo(f *celldv1alpha1.CelldFleet, obs *observation, applied int32, m *corev1.Pod, rep *report) bool {
	n, _ := ordinalOf(f, m.Name)
	sts := obs.sts
	if sts == nil || !statefulSetObserved(sts) {
		return false
	}
	templateStays := rep.blocked != nil || statefulSetTemplateCurrent(sts, renderStatefulSet(f, applied))
	return templateStays && everyMemberDecided(obs, applied, n)
}

// lostVolumeMember is the lowest-ordinal live member whose claim is Lost.
func (r *Reconciler) lostVolumeMember(f *celldv1alpha1.CelldFleet, obs *observation, applied int32) (*corev1.Pod, bool) {
	for i := range applied {
		p, ok := obs.members[i]
		if ok && !terminating(p) && claimLost(obs.claims[claimName(f, i)]) {
			return p, true
		}
	}
	return nil, false
}

// memberThatCannotComeBack is the one down member due for replacement. Every
// gate that keeps a down member's disk reports, in the Healing condition,
// which rule holds it and, while only the delay does, when it is due.
func (r *Reconciler) memberThatCannotComeBack(f *celldv1alpha1.CelldFleet, obs *observation, applied int32, rep *report) (*corev1.Pod, bool) {
	down := downMembers(obs, applied)
	if len(down) == 0 {
		return nil, false
	}
	rep.requeueSoon()
	if len(down) > 1 {
		rep.healWaits(celldv1alpha1.ReasonMembersDown,
			"%d members are down (%s); none is replaced until only one is: either disk may hold the only copy of some writes",
			len(down), r.describeDown(f, obs, down, rep))
		return nil, false
	}
	name := memberName(f, down[0])
	m, ok := obs.members[down[0]]
	claim, hasClaim := obs.claims[claimName(f, down[0])]
	switch {
	case !ok || terminating(m) || !hasClaim:
		rep.healWaits(celldv1alpha1.ReasonMemberAwaitingPod,
			"member %s (down since %s) has no live Pod on a disk yet; it is judged again once the StatefulSet has recreated it", name, r.downSinceText(name, rep))
		return nil, false
	case waitingOnConfig(m):
		rep.healWaits(celldv1alpha1.ReasonMemberWaitingOnConfiguration,
			"member %s (down since %s) waits on its image or configuration (%s); it is not replaced and keeps its disk",
			name, r.downSinceText(name, rep), configWaitOf(m))
		return nil, false
	}
	if w, waiting := waitingOnRevision(m, rep); waiting {
		rep.healWaits(celldv1alpha1.ReasonMemberWaitingOnRevision,
			"member %s (down since %s) has never been Ready on revision %s, after it was Ready on revision %s: it waits on its image or configuration, is not replaced and keeps its disk",
			w.member, r.downSinceText(name, rep), w.revision, w.readyRevision)
		return nil, false
	}
	if diskNeverServed(m, claim) {
		rep.healWaits(celldv1alpha1.ReasonDiskNeverServed,
			"member %s (down since %s) runs on disk %s, created for its current Pod, and has never been Ready on it: a fresh disk would not help, so it is not replaced",
			name, r.downSinceText(name, rep), claim.Name)
		return nil, false
	}
	due := r.replacementDueAt(obs, applied, down[0], rep)
	rep.setReplacementDue(name, due)
	if r.clock.Now().Before(due) {
		rep.healWaits(celldv1alpha1.ReasonMemberAwaitingReplacement,
			"member %s has been down since %s; unless it comes back it is replaced on a fresh disk at %s",
			name, r.downSinceText(name, rep), stamp(due))
		return nil, false
	}
	if !freshDiskMayGo(f, obs, applied, m, rep) {
		rep.healWaits(celldv1alpha1.ReasonReplacementWaitingOnScheduler,
			"member %s (down since %s) was due for a fresh disk at %s; it waits until the StatefulSet has observed its spec and the scheduler has placed, or found no node for, every other member",
			name, r.downSinceText(name, rep), stamp(due))
		return nil, false
	}
	return m, true
}

// replacementDueAt is when the one down member (ordinal n) may be replaced:
// the replacement delay after its first down moment, its current Pod's chance
// to come back (newPodChance), and every other member Ready for five minutes
// (so no session depends on the down member's disk), whichever is last.
func (r *Reconciler) replacementDueAt(obs *observation, applied, n int32, rep *report) time.Time {
	m := obs.members[n]
	now := r.clock.Now()
	due := r.memberDownSince(m, rep).Add(r.delay)
	due = latest(due, podDownSince(m, now).Add(min(r.delay, newPodChance)))
	for i := range applied {
		if p, ok := obs.members[i]; ok && i != n {
			if since, ready := readySince(p); ready {
				due = latest(due, since.Add(othersReadyFor))
			}
		}
	}
	return due
}

// noteUnschedulable names unplaceable members in status, and blocks once one
// has stayed so for the replacement delay.
func (r *Reconciler) noteUnschedulable(f *celldv1alpha1.CelldFleet, obs *observation, applied int32, rep *report) {
	for i := range applied {
		p, ok := obs.members[i]
		if !ok || terminating(p) {
			continue
		}
		since, unschedulable := unschedulableSince(p)
		if !unschedulable {
			continue
		}
		rep.unschedulable = append(rep.unschedulable, p.Name)
		rep.requeueSoon()
		if r.clock.Since(since) >= r.delay && rep.overdue == "" {
			rep.overdue = p.Name
		}
	}
	slices.Sort(rep.unschedulable)
}

// noteRevisionNotReady blocks once a member has waited on its current
// revision for the replacement delay: it will not come back until its image
// or configuration is fixed or rolled back, and the operator keeps its disk.
func (r *Reconciler) noteRevisionNotReady(obs *observation, applied int32, rep *report) {
	for i := range applied {
		p, ok := obs.members[i]
		if !ok || terminating(p) || podReady(p) {
			continue
		}
		w, waiting := waitingOnRevision(p, rep)
		if !waiting {
			continue
		}
		rep.requeueSoon()
		if r.clock.Since(r.memberDownSince(p, rep)) >= r.delay {
			rep.revisionWait = &w
			return
		}
	}
}

// markServed marks each Ready member whose disk was created for its current
// Pod with that claim's UID, once: the only evidence, later, that the disk
// held state if the member then cannot start on it. A member on an older
// disk needs no mark (its Pod is newer than its disk), so a long-running
// fleet costs no write.
func (r *Reconciler) markServed(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation, applied int32) error {
	for i := range applied {
		p, ok := obs.members[i]
		claim := obs.claims[claimName(f, i)]
		if !ok || claim == nil || !podReady(p) || !onDiskCreatedForPod(p, claim) || servedOn(p, claim) {
			continue
		}
		err := r.updatePod(ctx, p, func(fresh *corev1.Pod) bool {
			if !podReady(fresh) || servedOn(fresh, claim) {
				return false
			}
			if fresh.Annotations == nil {
				fresh.Annotations = map[string]string{}
			}
			fresh.Annotations[celldv1alpha1.AnnotationServedOn] = string(claim.UID)
			return true
		})
		if err != nil {
			return fmt.Errorf("mark member %s as served on claim %s: %w", p.Name, claim.Name, err)
		}
	}
	return nil
}
