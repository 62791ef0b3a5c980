package fleet

// Ordered Bucket fleets: the StatefulSet's Pods start behind the zone-release
// scheduling gate, and the operator releases each into the zone its ordinal
// selects (ordinal modulo the number of zones) by adding that zone to the
// Pod's node affinity, which a gated Pod may narrow, and removing the gate.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func gated(p *corev1.Pod, gate string) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == gate {
			return true
		}
	}
	return false
}

func (r *Reconciler) releaseIntoZones(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation) error {
	for ordinal, p := range obs.members {
		if terminating(p) || !gated(p, celldv1alpha1.SchedulingGateZoneRelease) {
			continue
		}
		released := p.DeepCopy()
		var gates []corev1.PodSchedulingGate
		for _, g := range released.Spec.SchedulingGates {
			if g.Name != celldv1alpha1.SchedulingGateZoneRelease {
				gates = append(gates, g)
			}
		}
		released.Spec.SchedulingGates = gates
		if pl := f.Spec.Placement; pl != nil && len(pl.Zones) > 0 {
			pinToZone(released, pl.Zones[int(ordinal)%len(pl.Zones)])
		}
		if err := r.client.Update(ctx, released); err != nil {
			return fmt.Errorf("release member %s into its zone: %w", p.Name, err)
		}
	}
	return nil
}

// pinToZone narrows every node selector term of the Pod to one zone.
func pinToZone(p *corev1.Pod, zone string) {
	req := corev1.NodeSelectorRequirement{Key: zoneTopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	na := p.Spec.Affinity.NodeAffinity
	if na == nil {
		na = &corev1.NodeAffinity{}
		p.Spec.Affinity.NodeAffinity = na
	}
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
	}
}
