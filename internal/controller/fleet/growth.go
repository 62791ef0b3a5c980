package fleet

// Growth (docs/fleet-operator.md, "Where a fresh disk goes"): the StatefulSet
// creates every new Pod at once, and a fresh disk scheduled while another
// member's Pod is pending can take the zone that member's disk needs. So the
// operator adds one run of consecutive ordinals at a time, all reattaching kept
// claims or all getting new ones, and each run waits until the StatefulSet has
// observed its spec and the scheduler has decided every current member's Pod.
// The runs are read from the claims on each reconcile.

import (
	appsv1 "k8s.io/api/apps/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// statefulSetObserved says the StatefulSet controller has seen its spec.
func statefulSetObserved(sts *appsv1.StatefulSet) bool {
	return sts.Status.ObservedGeneration >= sts.Generation
}

// everyMemberDecided says the scheduler placed, or found no node for, the Pod
// of every member below n other than except (-1 for none).
func everyMemberDecided(obs *observation, n, except int32) bool {
	for i := range n {
		if i == except {
			continue
		}
		p, ok := obs.members[i]
		if !ok || terminating(p) || !scheduleDecided(p) {
			return false
		}
	}
	return true
}

// growthMayProceed is the gate before the next run.
func growthMayProceed(obs *observation, cur int32) bool {
	return obs.sts != nil && statefulSetObserved(obs.sts) && everyMemberDecided(obs, cur, -1)
}

// keptDisk says ordinal n would reattach a kept claim.
func keptDisk(f *celldv1alpha1.CelldFleet, obs *observation, n int32) bool {
	_, ok := obs.claims[claimName(f, n)]
	return ok
}

// runEnd is the end (exclusive) of the run of ordinals starting at from and
// bounded by to: consecutive ordinals that all reattach kept disks or all get
// fresh ones. Bucket fleets have no disks: one run.
func runEnd(f *celldv1alpha1.CelldFleet, obs *observation, from, to int32) int32 {
	if !persistent(f) {
		return to
	}
	kept := keptDisk(f, obs, from)
	end := from + 1
	for end < to && keptDisk(f, obs, end) == kept {
		end++
	}
	return end
}
