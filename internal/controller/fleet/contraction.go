package fleet

// Contraction (docs/fleet-operator.md, "Rollout and scaling"): one member per
// step, and only after the previous change has rolled out, the same rule Bucket
// fleets follow. The removed member keeps its disk (claim retention Retain);
// growing back reattaches it.

import (
	appsv1 "k8s.io/api/apps/v1"
)

// statefulSetRolledOut says every member runs the current revision and is
// Ready at the applied count.
func statefulSetRolledOut(sts *appsv1.StatefulSet) bool {
	n := int32(0)
	if sts.Spec.Replicas != nil {
		n = *sts.Spec.Replicas
	}
	s := sts.Status
	return statefulSetObserved(sts) && s.Replicas == n && s.ReadyReplicas == n && s.UpdatedReplicas == n &&
		(s.UpdateRevision == "" || s.CurrentRevision == s.UpdateRevision)
}

func deploymentRolledOut(d *appsv1.Deployment) bool {
	n := int32(0)
	if d.Spec.Replicas != nil {
		n = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.Replicas == n && s.UpdatedReplicas == n && s.AvailableReplicas == n
}

// nextStep is the replica count to write now on the way from cur to desired:
// growth as far as the gate and the run allow, contraction by one after a
// completed rollout, else cur. progress says which way it is heading.
func nextStep(cur, desired int32, mayGrow func() bool, growTo func() int32, rolledOut bool) int32 {
	switch {
	case desired > cur && mayGrow():
		return growTo()
	case desired < cur && rolledOut:
		return cur - 1
	}
	return cur
}
