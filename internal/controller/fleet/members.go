package fleet

// Predicates over what the cluster reports about members. Every self-healing
// decision is made from these on each reconcile, and from the one thing
// remembered about a member between reconciles: its record in status
// (memberrecord.go).

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// Container waiting reasons that mean a member waits on its image or its
// configuration: a fresh disk would not help it (docs/fleet-operator.md,
// "Self-healing").
var configWaitReasons = map[string]bool{
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func terminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

func podReady(p *corev1.Pod) bool {
	c := podCondition(p, corev1.PodReady)
	return !terminating(p) && c != nil && c.Status == corev1.ConditionTrue
}

// readySince is when the member last became Ready; ok is false if it is not.
func readySince(p *corev1.Pod) (time.Time, bool) {
	if !podReady(p) {
		return time.Time{}, false
	}
	return podCondition(p, corev1.PodReady).LastTransitionTime.Time, true
}

// podDownSince is when the Pod stopped being Ready, or was created if it
// never was. A terminating Pod still reported Ready stops being so now. It
// knows only the current Pod: a member is timed from its record
// (memberDownSince), which outlives its Pods.
func podDownSince(p *corev1.Pod, now time.Time) time.Time {
	c := podCondition(p, corev1.PodReady)
	switch {
	case c != nil && c.Status == corev1.ConditionTrue:
		return now
	case c != nil && !c.LastTransitionTime.IsZero():
		return c.LastTransitionTime.Time
	}
	return p.CreationTimestamp.Time
}

// unschedulableSince is when the scheduler found no node for the Pod; ok is
// false unless that is its current verdict.
func unschedulableSince(p *corev1.Pod) (time.Time, bool) {
	c := podCondition(p, corev1.PodScheduled)
	if p.Spec.NodeName != "" || c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Time, true
}

// scheduleDecided says the scheduler has placed the Pod or found no node for
// it: the two outcomes after which a fresh disk cannot take a zone another
// member's disk needs.
func scheduleDecided(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" {
		return true
	}
	_, unschedulable := unschedulableSince(p)
	return unschedulable
}

// waitingOnConfig says the member waits on its image or configuration. A Pod
// held by a scheduling gate (the v0.0.5 launcher's, until the rolling update
// replaces it) waits on configuration: it never ran, so it is not down.
func waitingOnConfig(p *corev1.Pod) bool {
	if len(p.Spec.SchedulingGates) > 0 {
		return true
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && configWaitReasons[w.Reason] {
			return true
		}
	}
	return false
}

// onDiskCreatedForPod says the member's claim was created for its current
// Pod: a fresh disk would be no different. The StatefulSet creates a claim
// just before its Pod, and timestamps have whole seconds, so a claim at most
// claimPodSkew older than the Pod counts as created for it.
func onDiskCreatedForPod(p *corev1.Pod, claim *corev1.PersistentVolumeClaim) bool {
	return !claim.CreationTimestamp.Add(claimPodSkew).Before(p.CreationTimestamp.Time)
}

// diskNeverServed is the exemption for a member on a disk created for its
// current Pod (docs/fleet-operator.md, "Self-healing"): a new disk would not
// help a member that never held state on its disk. A disk created for
// the current Pod that has served it (the Pod was Ready on it, which the
// operator marks: see markServed) held state, and a corrupt disk there is
// replaced like any other (docs/decisions/0004-served-disk-mark.md).
func diskNeverServed(p *corev1.Pod, claim *corev1.PersistentVolumeClaim) bool {
	return onDiskCreatedForPod(p, claim) && !servedOn(p, claim)
}

// servedOn says the operator saw the Pod Ready on this claim.
func servedOn(p *corev1.Pod, claim *corev1.PersistentVolumeClaim) bool {
	return p.Annotations[celldv1alpha1.AnnotationServedOn] == string(claim.UID)
}

// claimPodSkew bounds how much older than its Pod a claim made for that Pod
// can look.
const claimPodSkew = time.Second

func claimLost(c *corev1.PersistentVolumeClaim) bool {
	return c != nil && c.Status.Phase == corev1.ClaimLost && c.DeletionTimestamp == nil
}
