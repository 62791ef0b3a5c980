package fleet

// Migration (seed 000): fleets created by v0.0.5 or the unreleased 0023
// controller run a StatefulSet with the OnDelete strategy. The operator
// adopts it in place: it switches to RollingUpdate and writes the current
// template, and Kubernetes replaces each earlier Pod, highest ordinal first,
// including Pods still held by the launcher scheduling gate. Retained claims
// keep their names and identities. The reservation annotation is rewritten by
// reservation.go on its first write.

import appsv1 "k8s.io/api/apps/v1"

// needsMigration says the StatefulSet does not yet use the rolling update
// with partition 0 that every rollout takes.
func needsMigration(sts *appsv1.StatefulSet) bool {
	s := sts.Spec.UpdateStrategy
	if s.Type != appsv1.RollingUpdateStatefulSetStrategyType && s.Type != "" {
		return true
	}
	return s.RollingUpdate != nil && s.RollingUpdate.Partition != nil && *s.RollingUpdate.Partition != 0
}
