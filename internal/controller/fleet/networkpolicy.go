package fleet

// The fleet's NetworkPolicy: the application port is open to clients, the
// peer and control port only to the fleet's own members.

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func renderNetworkPolicy(f *celldv1alpha1.CelldFleet) *networkingv1.NetworkPolicy {
	port := func(n int32) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(n))}}
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: workloadName(f), Namespace: f.Namespace, Labels: objectLabels(f)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selectorLabels(f)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{Ports: port(appPort)},
				{Ports: port(peerPort), From: []networkingv1.NetworkPolicyPeer{{
					PodSelector: &metav1.LabelSelector{MatchLabels: selectorLabels(f)},
				}}},
			},
		},
	}
	return np
}

func (r *Reconciler) convergeNetworkPolicy(ctx context.Context, f *celldv1alpha1.CelldFleet) (*finding, error) {
	want := renderNetworkPolicy(f)
	return r.convergeOwned(ctx, f, "NetworkPolicy", want,
		func() client.Object { return &networkingv1.NetworkPolicy{} },
		func(got client.Object) bool {
			return equality.Semantic.DeepEqual(got.(*networkingv1.NetworkPolicy).Spec, want.Spec)
		},
		func(dst client.Object) { dst.(*networkingv1.NetworkPolicy).Spec = *want.Spec.DeepCopy() })
}
