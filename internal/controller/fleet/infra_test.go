package fleet_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// TestServicesCreatedThenVerifiedOnly proves the operator creates <fleet> and
// headless <fleet>-peers, updates one only to fill a field a newer release
// declares on an otherwise exact match, and reports any other difference as
// InfrastructureBlocked without overwriting it.
func TestServicesCreatedThenVerifiedOnly(t *testing.T) {
	fx := newFixture(t)
	fx.create(persistentFleet(fx.ns, 3))
	fx.reconcile()
	app, peers := &corev1.Service{}, &corev1.Service{}
	if err := fx.get("f", app); err != nil {
		t.Fatalf("Service f must be created: %v", err)
	}
	if err := fx.get("f-peers", peers); err != nil {
		t.Fatalf("Service f-peers must be created: %v", err)
	}
	if peers.Spec.ClusterIP != corev1.ClusterIPNone || !peers.Spec.PublishNotReadyAddresses {
		t.Errorf("f-peers must be headless and publish not-ready members; got clusterIP %q publishNotReady %t",
			peers.Spec.ClusterIP, peers.Spec.PublishNotReadyAddresses)
	}

	// An older release did not declare appProtocol: the operator fills it.
	app.Spec.Ports[0].AppProtocol = nil
	if err := env.Client.Update(fx.ctx, app); err != nil {
		t.Fatal(err)
	}
	fx.rec.reset()
	fx.reconcile()
	if err := fx.get("f", app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.Ports[0].AppProtocol == nil {
		t.Fatal("the operator must fill a declared field missing on an otherwise matching Service")
	}
	fx.requireNotBlocked()

	// Someone changed the selector: verify only, never overwrite.
	app.Spec.Selector = map[string]string{"app": "someone-else"}
	if err := env.Client.Update(fx.ctx, app); err != nil {
		t.Fatal(err)
	}
	fx.reconcile()
	fx.requireBlocked(celldv1alpha1.ReasonInfrastructureBlocked, "Service f", "selector")
	if err := fx.get("f", app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.Selector["app"] != "someone-else" {
		t.Fatal("the operator overwrote a Service that differs from what it renders")
	}
}

// TestPodDisruptionBudgetFixedMaxUnavailableOne proves the budget is
// maxUnavailable 1 and is converged back when changed.
func TestPodDisruptionBudgetFixedMaxUnavailableOne(t *testing.T) {
	fx := newFixture(t)
	fx.create(persistentFleet(fx.ns, 3))
	fx.reconcile()
	pdb := &policyv1.PodDisruptionBudget{}
	if err := fx.get("f", pdb); err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Fatalf("the budget must be a fixed maxUnavailable: 1; got %+v", pdb.Spec)
	}
	zero := intstr.FromInt32(0)
	pdb.Spec.MaxUnavailable = &zero
	if err := env.Client.Update(fx.ctx, pdb); err != nil {
		t.Fatal(err)
	}
	fx.reconcile()
	if err := fx.get("f", pdb); err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Fatal("the operator must converge a changed budget back to maxUnavailable: 1")
	}
}

// TestNetworkPolicyOpensPeerPortToMembersOnly proves the NetworkPolicy.
func TestNetworkPolicyOpensPeerPortToMembersOnly(t *testing.T) {
	fx := newFixture(t)
	fx.create(persistentFleet(fx.ns, 3))
	fx.reconcile()
	np := &networkingv1.NetworkPolicy{}
	if err := fx.get("f", np); err != nil {
		t.Fatalf("the NetworkPolicy must be created: %v", err)
	}
	var peerRule *networkingv1.NetworkPolicyIngressRule
	for i, r := range np.Spec.Ingress {
		if r.Ports[0].Port.IntValue() == 8081 {
			peerRule = &np.Spec.Ingress[i]
		}
	}
	if peerRule == nil || len(peerRule.From) != 1 || peerRule.From[0].PodSelector.MatchLabels[celldv1alpha1.LabelFleet] != "f" {
		t.Fatalf("port 8081 must be open only to the fleet's members; got %+v", np.Spec.Ingress)
	}
	np.Spec.Ingress = nil
	if err := env.Client.Update(fx.ctx, np); err != nil {
		t.Fatal(err)
	}
	fx.reconcile()
	if err := fx.get("f", np); err != nil || len(np.Spec.Ingress) != 2 {
		t.Fatalf("the operator must converge a changed NetworkPolicy; got %+v (%v)", np.Spec.Ingress, err)
	}
}

// TestForeignObjectIsInfrastructureBlocked proves an object at a rendered
// name that the fleet does not control is reported, not adopted.
func TestForeignObjectIsInfrastructureBlocked(t *testing.T) {
	fx := newFixture(t)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: fx.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}}}
	if err := env.Client.Create(fx.ctx, pdb); err != nil {
		t.Fatal(err)
	}
	fx.create(persistentFleet(fx.ns, 3))
	fx.reconcile()
	fx.requireBlocked(celldv1alpha1.ReasonInfrastructureBlocked, "PodDisruptionBudget f")
	if err := fx.get("f", &appsv1.StatefulSet{}); err == nil {
		t.Fatal("the workload must not be created while a prerequisite is blocked")
	}
}
