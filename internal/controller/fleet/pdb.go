package fleet

// The fleet's PodDisruptionBudget: a fixed maxUnavailable of 1
// (docs/fleet-operator.md, "Rollout and scaling"). A Pod that is not Ready
// counts against it, so node drains proceed one member at a time; the operator
// never lowers it.

import (
	"context"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func renderPDB(f *celldv1alpha1.CelldFleet) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: workloadName(f), Namespace: f.Namespace, Labels: objectLabels(f)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &one,
			Selector:       &metav1.LabelSelector{MatchLabels: selectorLabels(f)},
		},
	}
	return p
}

func (r *Reconciler) convergePDB(ctx context.Context, f *celldv1alpha1.CelldFleet) (*finding, error) {
	want := renderPDB(f)
	return r.convergeOwned(ctx, f, "PodDisruptionBudget", want,
		func() client.Object { return &policyv1.PodDisruptionBudget{} },
		func(got client.Object) bool {
			s := got.(*policyv1.PodDisruptionBudget).Spec
			return equality.Semantic.DeepEqual(s.MaxUnavailable, want.Spec.MaxUnavailable) &&
				s.MinAvailable == nil && equality.Semantic.DeepEqual(s.Selector, want.Spec.Selector)
		},
		func(dst client.Object) { dst.(*policyv1.PodDisruptionBudget).Spec = *want.Spec.DeepCopy() })
}
