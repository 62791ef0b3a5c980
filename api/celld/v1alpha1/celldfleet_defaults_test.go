package v1alpha1_test

import (
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// TestCelldFleetSchemaDefaults proves the defaults live in the schema: the API
// server fills them in, so every client sees the same values.
func TestCelldFleetSchemaDefaults(t *testing.T) {
	ctx := ctxT(t)
	obj := object(fleetGVK, "defaults", with(persistentSpec,
		set(map[string]any{"zones": zones("a", "b", "c"), "azCount": int64(3)}, "placement"),
		set(map[string]any{"mode": "Automatic", "maxReplicas": int64(9)}, "capacity"),
		set(map[string]any{}, "maintenance"),
	))
	obj.SetNamespace(testNamespace)
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatalf("create a fleet with only the required fields: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })

	var got celldv1alpha1.CelldFleet
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: testNamespace, Name: "defaults"}, &got); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		field     string
		got, want any
	}{
		{"spec.replicas", got.Spec.Replicas, int32(3)},
		{"spec.lifecycle.shutdownSeconds", got.Spec.Lifecycle.ShutdownSeconds, int32(30)},
		{"spec.lifecycle.terminationGraceSeconds", got.Spec.Lifecycle.TerminationGraceSeconds, int32(45)},
		{"spec.placement.mode", got.Spec.Placement.Mode, celldv1alpha1.PlacementStrict},
		{"spec.capacity.minReplicas", got.Spec.Capacity.MinReplicas, int32(1)},
		{"spec.capacity.step", got.Spec.Capacity.Step, int32(1)},
		{"spec.maintenance.paused", got.Spec.Maintenance.Paused, false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("the API server must default %s to %v; got %v", c.field, c.want, c.got)
		}
	}
}

// TestCelldFleetScaleSubresource proves an external system can set the replica
// count through the scale subresource, within the schema's bounds.
func TestCelldFleetScaleSubresource(t *testing.T) {
	ctx := ctxT(t)
	obj := object(fleetGVK, "scale", bucketSpec())
	obj.SetNamespace(testNamespace)
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
	fleet := &celldv1alpha1.CelldFleet{}
	fleet.Namespace, fleet.Name = testNamespace, "scale"

	scale := &autoscalingv1.Scale{}
	if err := env.Client.SubResource("scale").Get(ctx, fleet, scale); err != nil {
		t.Fatalf("the CelldFleet must have a scale subresource: %v", err)
	}
	if scale.Spec.Replicas != 3 {
		t.Fatalf("scale subresource must report spec.replicas (3); got %d", scale.Spec.Replicas)
	}
	scale.Spec.Replicas = 5
	if err := env.Client.SubResource("scale").Update(ctx, fleet, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("the scale subresource must accept 5 replicas: %v", err)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: testNamespace, Name: "scale"}, fleet); err != nil {
		t.Fatal(err)
	}
	if fleet.Spec.Replicas != 5 {
		t.Fatalf("a scale update must write spec.replicas; got %d", fleet.Spec.Replicas)
	}
	scale.Spec.Replicas = 101
	scale.ResourceVersion = ""
	err := env.Client.SubResource("scale").Update(ctx, fleet, client.WithSubResourceBody(scale))
	checkOutcome(t, "a scale update to 101 replicas", err, "spec.replicas in body should be less than or equal to 100")
}

// TestCelldFleetDiscovery proves the short name and the status subresource are
// served.
func TestCelldFleetDiscovery(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := dc.ServerResourcesForGroupVersion(celldv1alpha1.GroupVersion.String())
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Name] = true
		if r.Name == "celldfleets" && (len(r.ShortNames) != 1 || r.ShortNames[0] != "cf") {
			t.Errorf("celldfleets must have the short name cf; got %v", r.ShortNames)
		}
	}
	for _, want := range []string{"celldfleets", "celldfleets/status", "celldfleets/scale", "celldstoragereservations"} {
		if !served[want] {
			t.Errorf("the API server must serve %s", want)
		}
	}
}
