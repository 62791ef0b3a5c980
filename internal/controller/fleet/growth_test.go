package fleet_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func (fx *fixture) appliedReplicas() int32 { return *fx.sts().Spec.Replicas }

func noPlacement(f *celldv1alpha1.CelldFleet) { f.Spec.Placement = nil }

// TestGrowthAddsOneRunOfKeptOrFreshDisksAtATime proves growth reattaches the
// kept disks as one run, waits until the scheduler has decided every current
// member's Pod (placed or unschedulable), and only then adds the fresh run.
func TestGrowthAddsOneRunOfKeptOrFreshDisksAtATime(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 1 })
	fx.converge("contracted to 1 member", fx.settled(1))
	if _, kept := fx.claims()["data-f-2"]; !kept {
		t.Fatal("scale-in deleted a removed member's disk")
	}

	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 5 })
	fx.reconcile()
	if got := fx.appliedReplicas(); got != 3 {
		t.Fatalf("growth from 1 to 5 must first add the run of kept disks (members 1-2), reaching 3; the StatefulSet has %d", got)
	}
	fx.reconcile()
	if got := fx.appliedReplicas(); got != 3 {
		t.Fatalf("the fresh run must wait until the scheduler has decided members 1-2, whose Pods do not exist yet; the StatefulSet has %d", got)
	}
	fx.kube.schedulerPaused = true
	fx.kube.step(fx.ctx) // the StatefulSet creates f-1 and f-2 and observes its spec; both pending
	fx.reconcile()
	if s := fx.sts(); s.Status.ObservedGeneration < s.Generation || *s.Spec.Replicas != 3 {
		t.Fatalf("the fresh run must wait while members 1-2 are pending and undecided, though the StatefulSet observed its spec; it has %d", *s.Spec.Replicas)
	}
	fx.kube.schedulerPaused = false
	fx.kube.unschedulable["f-2"] = true
	fx.kube.step(fx.ctx) // the scheduler places f-1 and finds no node for f-2
	fx.reconcile()
	if got := fx.appliedReplicas(); got != 5 {
		t.Fatalf("once every current member is placed or unschedulable the fresh run (members 3-4) must be added; the StatefulSet has %d", got)
	}
	delete(fx.kube.unschedulable, "f-2")
}

// TestGrowthWaitsUntilStatefulSetObservedItsSpec proves a run is not added
// while the StatefulSet controller has not observed the StatefulSet's spec,
// and that this gate alone holds it back: the template is unchanged (another
// writer's edit bumped the generation) and every current member is placed.
func TestGrowthWaitsUntilStatefulSetObservedItsSpec(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(1, noPlacement)
	s := fx.sts()
	s.Spec.MinReadySeconds = 1 // another writer's edit: a new generation, the operator's template as it was
	fx.must(env.Client.Update(fx.ctx, s))
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 3 })
	fx.reconcile()
	s = fx.sts()
	if s.Status.ObservedGeneration >= s.Generation {
		t.Fatal("test setup: the simulated StatefulSet controller must not have observed the new generation yet")
	}
	if !isReady(fx.pods()["f-0"]) {
		t.Fatal("test setup: the current member must be placed and Ready")
	}
	if got := *s.Spec.Replicas; got != 1 {
		t.Fatalf("growth must wait until the StatefulSet has observed its spec; it has %d replicas", got)
	}
	fx.converge("grown to 3", fx.settled(3))
}

// TestContractionOneMemberPerStepAfterRollout proves contraction removes one
// member per step and only after the previous change has rolled out, keeping
// each removed member's disk.
func TestContractionOneMemberPerStepAfterRollout(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(4, noPlacement)
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 2 })
	fx.reconcile()
	if got := fx.appliedReplicas(); got != 3 {
		t.Fatalf("contraction must remove one member per step; the StatefulSet went from 4 to %d", got)
	}
	fx.kube.down["f-0"] = true
	for range 5 {
		fx.kube.step(fx.ctx)
		fx.reconcile()
	}
	if got := fx.appliedReplicas(); got != 3 {
		t.Fatalf("the next contraction step must wait until the previous change rolled out (member f-0 is not Ready); the StatefulSet has %d", got)
	}
	delete(fx.kube.down, "f-0")
	fx.converge("contracted to 2", fx.settled(2))
	for _, n := range []string{"data-f-2", "data-f-3"} {
		if _, ok := fx.claimUIDs()[n]; !ok {
			t.Errorf("contraction deleted removed member's disk %s", n)
		}
	}
	fx.requireNoMemberDeletes("contraction")
}

// TestStorageIdentityConflictRefusesForeignClaim proves the operator refuses
// to create or grow the StatefulSet over a claim without the fleet's UID
// label, and never touches that claim.
func TestStorageIdentityConflictRefusesForeignClaim(t *testing.T) {
	for _, tc := range []struct {
		name    string
		running int32 // members before the foreign claim appears (0: none)
	}{{"on creation", 0}, {"on growth", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			if tc.running > 0 {
				fx.runningFleet(tc.running, noPlacement)
			}
			foreign := &corev1.PersistentVolumeClaim{}
			foreign.Name, foreign.Namespace = "data-f-2", fx.ns
			foreign.Labels = map[string]string{celldv1alpha1.LabelFleetUID: "another-fleet"}
			foreign.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
			foreign.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resourceGi}
			if err := env.Client.Create(fx.ctx, foreign); err != nil {
				t.Fatal(err)
			}
			if tc.running == 0 {
				fx.create(persistentFleet(fx.ns, 3))
			} else {
				fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 3 })
			}
			fx.reconcile()
			fx.requireBlocked(celldv1alpha1.ReasonStorageIdentityConflict, "data-f-2")
			if tc.running == 0 {
				if err := fx.get(fleetName, &appsv1.StatefulSet{}); err == nil {
					t.Fatal("the operator created the StatefulSet over another fleet's claim")
				}
			} else if got := fx.appliedReplicas(); got != tc.running {
				t.Fatalf("the operator grew the StatefulSet over another fleet's claim to %d", got)
			}
			if uid := fx.claimUIDs()["data-f-2"]; uid != foreign.UID {
				t.Fatal("the operator touched another fleet's claim")
			}
		})
	}
}
