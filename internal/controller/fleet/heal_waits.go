package fleet

// What self-healing tells an administrator while it leaves a down member
// alone (docs/fleet-operator.md, Self-healing): the Healing condition names
// the member, since when it has been down and either when it will be
// replaced or which rule keeps its disk, each rule with its own reason. The
// time a replacement is due is also recorded per member in status.members
// (replacementDue), for `kubectl celld status`.

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// downMembers are the applied ordinals whose member has no Pod or is not Ready.
func downMembers(obs *observation, applied int32) []int32 {
	var down []int32
	for i := range applied {
		if p, ok := obs.members[i]; !ok || !podReady(p) {
			down = append(down, i)
		}
	}
	return down
}

// describeDown lists the down members, each with since when it has been down
// and what it waits on when the cluster says so.
func (r *Reconciler) describeDown(f *celldv1alpha1.CelldFleet, obs *observation, down []int32, rep *report) string {
	parts := make([]string, 0, len(down))
	for _, n := range down {
		name := memberName(f, n)
		s := fmt.Sprintf("%s down since %s", name, r.downSinceText(name, rep))
		if p, ok := obs.members[n]; ok {
			if _, unschedulable := unschedulableSince(p); unschedulable {
				s += ", unschedulable"
			} else if waitingOnConfig(p) {
				s += ", waiting on " + configWaitOf(p)
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// downSinceText is the member's first down moment as its record has it.
func (r *Reconciler) downSinceText(name string, rep *report) string {
	if rec, ok := rep.memberRecord(name); ok && rec.DownSince != nil {
		return stamp(rec.DownSince.Time)
	}
	return "an unrecorded moment"
}

// configWaitOf names what a member waiting on its image or configuration
// waits on: a scheduling gate or its container's waiting reason.
func configWaitOf(p *corev1.Pod) string {
	if len(p.Spec.SchedulingGates) > 0 {
		return "scheduling gate " + p.Spec.SchedulingGates[0].Name
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && configWaitReasons[w.Reason] {
			return w.Reason
		}
	}
	return "its configuration"
}

// setReplacementDue records in this reconcile's member record when the named
// member's replacement is due.
func (rep *report) setReplacementDue(name string, due time.Time) {
	for i := range rep.members {
		if rep.members[i].Name == name {
			rep.members[i].ReplacementDue = &metav1.Time{Time: due.Truncate(time.Second)}
		}
	}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
