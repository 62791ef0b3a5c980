package fleet_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// TestStatefulSetTemplateEditedByHandIsConvergedBack proves the operator
// compares the Pod template it renders with the StatefulSet's, not only its
// hash annotation: a template edited by hand (the hash left as it was) is
// converged back, and a settled fleet, whose template the API server has
// defaulted, costs no write.
func TestStatefulSetTemplateEditedByHandIsConvergedBack(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	fx.rec.reset()
	fx.idle()
	for _, w := range fx.rec.recorded() {
		if w.kind == "StatefulSet" {
			t.Fatalf("a settled fleet must cost no StatefulSet write (the API server's defaults are not a difference); got %s", w)
		}
	}

	sts := fx.sts()
	c := &sts.Spec.Template.Spec.Containers[0]
	c.Image = newImage
	c.Env = append(c.Env, corev1.EnvVar{Name: "EDITED", Value: "by-hand"})
	sts.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(1))
	fx.must(env.Client.Update(fx.ctx, sts))
	fx.reconcile()
	got := fx.sts().Spec.Template.Spec
	if img := got.Containers[0].Image; img != image {
		t.Fatalf("a hand-edited StatefulSet template must be converged back to the rendered image %s; got %s", image, img)
	}
	for _, e := range got.Containers[0].Env {
		if e.Name == "EDITED" {
			t.Fatal("a hand-edited StatefulSet template must be converged back: the added variable EDITED is still there")
		}
	}
	if g := ptr.Deref(got.TerminationGracePeriodSeconds, 0); g == 1 {
		t.Fatal("a hand-edited StatefulSet template must be converged back: terminationGracePeriodSeconds is still 1")
	}
	fx.converge("the fleet settled on the rendered template", fx.settled(3))
}

// TestServiceRoutingFieldEditedByHandIsInfrastructureBlocked proves the
// operator verifies the Service fields it does not render but that route
// traffic (externalIPs, trafficDistribution) or that it declares
// (ipFamilyPolicy): a change is InfrastructureBlocked naming the field, and
// the Service is not overwritten.
func TestServiceRoutingFieldEditedByHandIsInfrastructureBlocked(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*corev1.Service)
		kept  func(*corev1.Service) bool
	}{
		{"externalIPs", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.10"} },
			func(s *corev1.Service) bool { return len(s.Spec.ExternalIPs) == 1 }},
		{"trafficDistribution", func(s *corev1.Service) {
			s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
		},
			func(s *corev1.Service) bool { return s.Spec.TrafficDistribution != nil }},
		{"ipFamilyPolicy", func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack) },
			func(s *corev1.Service) bool {
				return ptr.Deref(s.Spec.IPFamilyPolicy, "") == corev1.IPFamilyPolicyPreferDualStack
			}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			fx := newFixture(t)
			fx.create(persistentFleet(fx.ns, 3))
			fx.reconcile()
			fx.requireNotBlocked()
			svc := &corev1.Service{}
			fx.must(fx.get(fleetName, svc))
			tc.edit(svc)
			fx.must(env.Client.Update(fx.ctx, svc))
			fx.reconcile()
			fx.requireBlocked(celldv1alpha1.ReasonInfrastructureBlocked, "Service f", tc.field)
			fx.must(fx.get(fleetName, svc))
			if !tc.kept(svc) {
				t.Fatalf("the operator must not overwrite a Service whose %s differs", tc.field)
			}
		})
	}
}
