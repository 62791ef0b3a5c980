package fleet_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// TestBucketFleetRunsAsDeploymentWithoutDisks proves the Bucket profile's
// Deployment: an emptyDir at /work, bucket durability, the Pod UID as node.
func TestBucketFleetRunsAsDeploymentWithoutDisks(t *testing.T) {
	fx := newFixture(t)
	fx.create(bucketFleet(fx.ns, 3, ""))
	fx.reconcile()
	d := &appsv1.Deployment{}
	if err := fx.get("f", d); err != nil {
		t.Fatalf("a Bucket fleet must run as a Deployment: %v", err)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Volumes) != 1 || pod.Volumes[0].EmptyDir == nil {
		t.Errorf("Bucket members must have no disk, an emptyDir at /work; got %+v", pod.Volumes)
	}
	vars := envOf(pod.Containers[0])
	if vars["CELLD_DURABILITY"].Value != "bucket" || vars["CELLD_NODE"].ValueFrom.FieldRef.FieldPath != "metadata.uid" ||
		vars["CELLD_ADVERTISE"].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("Bucket env must be durability bucket, node = Pod UID, advertise = Pod IP; got %+v", vars)
	}
	if *d.Spec.Replicas != 3 {
		t.Errorf("the Deployment must run 3 members; got %d", *d.Spec.Replicas)
	}
	var claims corev1.PersistentVolumeClaimList
	if err := env.Client.List(fx.ctx, &claims, client.InNamespace(fx.ns)); err != nil || len(claims.Items) != 0 {
		t.Errorf("a Bucket fleet must have no claims; got %d", len(claims.Items))
	}
	// Contraction: one member per step, after the rollout.
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 1; f.Spec.Placement = nil })
	fx.reconcile()
	if err := fx.get("f", d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 3 {
		t.Fatalf("a Bucket fleet must contract only after the previous change rolled out; the Deployment went to %d", *d.Spec.Replicas)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3, ReadyReplicas: 3}
	if err := env.Client.Status().Update(fx.ctx, d); err != nil {
		t.Fatal(err)
	}
	fx.reconcile()
	if err := fx.get("f", d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 {
		t.Fatalf("a Bucket fleet must contract one member per step; the Deployment went to %d", *d.Spec.Replicas)
	}
}

// TestOrderedBucketReleasesPodsIntoZonesByOrdinal proves the Ordered Bucket
// StatefulSet's Pods start gated and are released into the zone their
// ordinal selects.
func TestOrderedBucketReleasesPodsIntoZonesByOrdinal(t *testing.T) {
	fx := newFixture(t)
	fx.create(bucketFleet(fx.ns, 4, celldv1alpha1.BucketWorkloadOrdered))
	fx.converge("4 Ready Ordered members", fx.settled(4))
	s := fx.sts()
	if len(s.Spec.VolumeClaimTemplates) != 0 {
		t.Error("an Ordered Bucket fleet must have no disks")
	}
	zones := []string{"za", "zb", "zc"}
	for i, name := range []string{"f-0", "f-1", "f-2", "f-3"} {
		p := fx.pods()[name]
		if len(p.Spec.SchedulingGates) != 0 {
			t.Fatalf("member %s must be released from its scheduling gate", name)
		}
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		last := terms[0].MatchExpressions[len(terms[0].MatchExpressions)-1]
		if last.Key != "topology.kubernetes.io/zone" || len(last.Values) != 1 || last.Values[0] != zones[i%3] {
			t.Errorf("member %s must be released into zone %s by its ordinal; got %+v", name, zones[i%3], last)
		}
	}
}
