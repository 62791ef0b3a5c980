package fleet

// The per-member record in status.members (docs/fleet-operator.md,
// Self-healing): for each PersistentFleet member, the revision it was last
// seen Ready on and, while it is down, the first moment it was down with no
// Ready period since. The cluster forgets both when a member's Pod is
// recreated (a force-deleted stranded Pod, a rolling update), while the
// replacement delay is timed from the member, and a member waiting on its
// image or configuration is left alone.
//
// It is the one part of status that is also an input: it is rebuilt on each
// reconcile from the members' Pods and the record last written, and written
// with the rest of status by writeStatus. A record that is missing (never
// written, or lost) is rebuilt from the current Pod: the member is then
// timed from that Pod, the conservative outcome (more patience, not less).

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// trackMembers rebuilds the record of each applied member of a PersistentFleet
// from its Pod and the record last written. A Ready member records its
// revision and clears its down time. A down member keeps the down time it
// has, across Pods on the same revision, or starts one from its Pod (or now,
// with no Pod). A down member whose Pod moves to another revision is timed
// afresh from that Pod: after a rollback, the time it waited on the bad
// revision does not make its disk due at once.
func trackMembers(f *celldv1alpha1.CelldFleet, obs *observation, now time.Time) []celldv1alpha1.MemberStatus {
	if !persistent(f) || obs.sts == nil {
		return nil
	}
	last := map[string]celldv1alpha1.MemberStatus{}
	for _, m := range f.Status.Members {
		last[m.Name] = m
	}
	var out []celldv1alpha1.MemberStatus
	for i := range obs.applied() {
		rec := last[memberName(f, i)]
		rec.Name = memberName(f, i)
		rec.ReplacementDue = nil // derived anew by self-healing, never read back
		p, ok := obs.members[i]
		switch {
		case ok && podReady(p):
			if rev := podRevision(p); rev != "" {
				rec.ReadyRevision = rev
			}
			rec.DownSince, rec.DownRevision = nil, ""
		case !ok && rec.DownSince == nil:
			rec.DownSince = &metav1.Time{Time: now.Truncate(time.Second)}
		case !ok:
			// Between two Pods: the member stays down since its first moment.
		case rec.DownSince == nil || (rec.DownRevision != "" && rec.DownRevision != podRevision(p)):
			rec.DownSince = &metav1.Time{Time: podDownSince(p, now).Truncate(time.Second)}
			rec.DownRevision = podRevision(p)
		default:
			rec.DownRevision = podRevision(p)
		}
		if rec.ReadyRevision != "" || rec.DownSince != nil {
			out = append(out, rec)
		}
	}
	return out
}

// memberRecord is this reconcile's record of the named member.
func (rep *report) memberRecord(name string) (celldv1alpha1.MemberStatus, bool) {
	for _, m := range rep.members {
		if m.Name == name {
			return m, true
		}
	}
	return celldv1alpha1.MemberStatus{}, false
}

// memberDownSince is when the member went down: its record's first down
// moment, or, without one, its current Pod's.
func (r *Reconciler) memberDownSince(p *corev1.Pod, rep *report) time.Time {
	if rec, ok := rep.memberRecord(p.Name); ok && rec.DownSince != nil {
		return rec.DownSince.Time
	}
	return podDownSince(p, r.clock.Now())
}

// podRevision is the StatefulSet revision the Pod was created from.
func podRevision(p *corev1.Pod) string { return p.Labels[appsv1.ControllerRevisionHashLabelKey] }

// revisionWait describes a down member that has never been Ready on its
// current revision, after it was Ready on an earlier one.
type revisionWait struct {
	member, revision, readyRevision string
}

// waitingOnRevision says the down member p has never been Ready on its Pod's
// revision while it was Ready on an earlier one: a member waiting on its
// image or configuration (a crash-looping image or environment), which a new
// disk would not help.
func waitingOnRevision(p *corev1.Pod, rep *report) (revisionWait, bool) {
	rec, ok := rep.memberRecord(p.Name)
	rev := podRevision(p)
	if !ok || rec.ReadyRevision == "" || rev == "" || rev == rec.ReadyRevision {
		return revisionWait{}, false
	}
	return revisionWait{member: p.Name, revision: rev, readyRevision: rec.ReadyRevision}, true
}
