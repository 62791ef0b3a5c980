package fleet_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// TestPausedFleetWorkloadIsFrozen proves spec.maintenance.paused stops every
// workload change and reports MaintenancePaused, and unpausing resumes.
func TestPausedFleetWorkloadIsFrozen(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	rv := fx.sts().ResourceVersion
	fx.edit(func(f *celldv1alpha1.CelldFleet) {
		f.Spec.Maintenance = &celldv1alpha1.Maintenance{Paused: true}
		f.Spec.RuntimeImage = newImage
		f.Spec.Replicas = 5
	})
	fx.reconcile()
	if got := fx.sts().ResourceVersion; got != rv {
		t.Fatal("a paused fleet's StatefulSet must not change")
	}
	if c := fx.condition(celldv1alpha1.ConditionMaintenancePaused); c.Status != metav1.ConditionTrue || c.Reason != string(celldv1alpha1.ReasonPaused) {
		t.Fatalf("a paused fleet must report MaintenancePaused=True/Paused; got %s/%s", c.Status, c.Reason)
	}
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Maintenance.Paused = false })
	fx.converge("5 members on the new image", fx.settled(5))
}

// TestInvalidConfigurationLeavesWorkloadUntouched proves runtime checks report
// InvalidConfiguration and change nothing, for a new and a running fleet.
func TestInvalidConfigurationLeavesWorkloadUntouched(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(*celldv1alpha1.CelldFleet)
		message string
	}{
		{"missing ServiceAccount", func(f *celldv1alpha1.CelldFleet) { f.Spec.ServiceAccountName = "absent" }, "ServiceAccount"},
		{"missing StorageClass", func(f *celldv1alpha1.CelldFleet) { f.Spec.Storage.StorageClassName = ptr.To("absent") }, "StorageClass"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" on a new fleet", func(t *testing.T) {
			fx := newFixture(t)
			f := persistentFleet(fx.ns, 3)
			tc.edit(f)
			fx.create(f)
			res := fx.reconcile()
			fx.requireBlocked(celldv1alpha1.ReasonInvalidConfiguration, tc.message)
			if res.RequeueAfter == 0 {
				t.Error("a Blocked fleet must be looked at again: what unblocks it is not watched")
			}
			if err := fx.get("f", &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
				t.Fatal("an invalid fleet must not get a workload")
			}
		})
	}
	t.Run("missing ServiceAccount on a running fleet", func(t *testing.T) {
		fx := newFixture(t)
		fx.runningFleet(3, noPlacement)
		rv := fx.sts().ResourceVersion
		fx.edit(func(f *celldv1alpha1.CelldFleet) {
			f.Spec.ServiceAccountName = "absent"
			f.Spec.RuntimeImage = newImage
		})
		fx.reconcile()
		fx.requireBlocked(celldv1alpha1.ReasonInvalidConfiguration, "absent")
		if fx.sts().ResourceVersion != rv {
			t.Fatal("an invalid configuration must leave the running workload untouched")
		}
	})
	t.Run("StorageClass that binds immediately with zone spread", func(t *testing.T) {
		fx := newFixture(t)
		sc := &storageClassImmediate{}
		sc.create(fx)
		f := persistentFleet(fx.ns, 3)
		f.Spec.Storage.StorageClassName = ptr.To(sc.name)
		fx.create(f)
		fx.reconcile()
		fx.requireBlocked(celldv1alpha1.ReasonInvalidConfiguration, "WaitForFirstConsumer")
	})
}

// TestSecondFleetOnSameBucketRefused proves bucket ownership through the
// reservation: a second fleet on a reserved bucket is Blocked BucketReserved
// and gets no workload.
func TestSecondFleetOnSameBucketRefused(t *testing.T) {
	fx := newFixture(t)
	fx.create(persistentFleet(fx.ns, 3))
	fx.reconcile()
	res := &celldv1alpha1.CelldStorageReservation{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Name: "bucket-" + fx.ns}, res); err != nil {
		t.Fatalf("the fleet must reserve its bucket: %v", err)
	}
	if res.Spec.Fleet.UID != string(fx.fleet().UID) {
		t.Fatalf("the reservation must name the fleet's UID; got %+v", res.Spec.Fleet)
	}
	second := persistentFleet(fx.ns, 3)
	second.Name = "g"
	if err := env.Client.Create(fx.ctx, second); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.op.Reconcile(fx.ctx, reqFor(fx.ns, "g")); err != nil {
		t.Fatal(err)
	}
	g := &celldv1alpha1.CelldFleet{}
	if err := fx.get("g", g); err != nil {
		t.Fatal(err)
	}
	c := findCondition(g, celldv1alpha1.ConditionBlocked)
	if c.Status != metav1.ConditionTrue || c.Reason != string(celldv1alpha1.ReasonBucketReserved) {
		t.Fatalf("a second fleet on a reserved bucket must be Blocked/BucketReserved; got %s/%s", c.Status, c.Reason)
	}
	if err := fx.get("g", &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Fatal("a fleet refused its bucket must get no workload")
	}
}

// TestFleetDeletionRemovesComputeThenDisksAndKeepsReservation proves the
// deletion order (no disk delete while a member Pod exists), that every fleet
// disk and no other claim is deleted, each bound to its UID, and that the
// bucket stays reserved, for both profiles.
func TestFleetDeletionRemovesComputeThenDisksAndKeepsReservation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fleet func(ns string) *celldv1alpha1.CelldFleet
	}{
		{"PersistentFleet", func(ns string) *celldv1alpha1.CelldFleet { f := persistentFleet(ns, 3); noPlacement(f); return f }},
		{"Bucket Deployment", func(ns string) *celldv1alpha1.CelldFleet { return bucketFleet(ns, 3, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.create(tc.fleet(fx.ns))
			for range 5 {
				fx.reconcile()
				fx.kube.step(fx.ctx)
			}
			other := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: fx.ns},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceGi}}}}
			fx.must(env.Client.Create(fx.ctx, other))
			fx.must(env.Client.Delete(fx.ctx, fx.fleet()))
			fx.rec.before = func(w write) {
				if w.op == "delete" && w.kind == "PersistentVolumeClaim" && len(fx.pods()) > 0 {
					t.Errorf("fleet deletion deleted disk %s while %d member Pods exist; compute goes first", w.name, len(fx.pods()))
				}
			}
			fx.reconcile()
			if c := fx.condition(celldv1alpha1.ConditionDeleting); c.Reason != string(celldv1alpha1.ReasonDeletingCompute) {
				t.Fatalf("Deleting must report DeletingCompute first; got %s", c.Reason)
			}
			for range maxRounds {
				fx.reconcile()
				fx.kube.step(fx.ctx)
				if err := fx.get(fleetName, &celldv1alpha1.CelldFleet{}); apierrors.IsNotFound(err) {
					break
				}
			}
			fx.rec.before = nil
			if err := fx.get(fleetName, &celldv1alpha1.CelldFleet{}); !apierrors.IsNotFound(err) {
				t.Fatal("the fleet must be gone once compute and disks are")
			}
			if len(fx.pods()) != 0 {
				t.Fatal("fleet deletion must remove every member Pod")
			}
			for _, d := range append(fx.rec.deletesOf("PersistentVolumeClaim"), fx.rec.deletesOf("StatefulSet")...) {
				if !d.preconditions {
					t.Errorf("every delete must carry a UID precondition: %v", d)
				}
			}
			for n, c := range fx.claims() {
				if n != other.Name && c.DeletionTimestamp == nil {
					t.Errorf("fleet deletion must delete every fleet disk; %s is live", n)
				}
			}
			if _, ok := fx.claimUIDs()[other.Name]; !ok {
				t.Error("fleet deletion must not delete a claim that is not the fleet's")
			}
			if err := env.Client.Get(fx.ctx, client.ObjectKey{Name: "bucket-" + fx.ns}, &celldv1alpha1.CelldStorageReservation{}); err != nil {
				t.Fatalf("fleet deletion must keep the bucket reservation: %v", err)
			}
		})
	}
}

// TestOperatorRestartMidRolloutAndMidContractionConverges proves a fresh
// operator picks up a rollout and a contraction halfway through.
func TestOperatorRestartMidRolloutAndMidContractionConverges(t *testing.T) {
	t.Run("mid-rollout", func(t *testing.T) {
		fx := newFixture(t)
		fx.runningFleet(3, noPlacement)
		fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.RuntimeImage = newImage })
		for range 3 {
			fx.reconcile()
			fx.kube.step(fx.ctx)
		}
		if fx.settled(3)() {
			t.Fatal("test setup: the rollout must still be in progress")
		}
		fx.restartOperator()
		fx.converge("the rollout completed after an operator restart", fx.settled(3))
		for _, p := range fx.pods() {
			if p.Spec.Containers[0].Image != newImage {
				t.Fatalf("member %s still runs the old image", p.Name)
			}
		}
		fx.requireNoMemberDeletes("a rollout across an operator restart")
	})
	t.Run("mid-contraction", func(t *testing.T) {
		fx := newFixture(t)
		fx.runningFleet(4, noPlacement)
		fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 2 })
		fx.reconcile()
		fx.kube.step(fx.ctx)
		fx.restartOperator()
		fx.converge("the contraction completed after an operator restart", fx.settled(2))
		fx.requireNoMemberDeletes("a contraction across an operator restart")
		if len(fx.claimUIDs()) != 4 {
			t.Fatal("contraction across a restart must keep every removed member's disk")
		}
	})
}

// TestConcurrentUpdateConflictRetriedFromFreshRead proves a write that
// conflicts with another writer is retried from a fresh read and keeps the
// other writer's change: the StatefulSet update, the status write and the
// release of a replacement hold.
func TestConcurrentUpdateConflictRetriedFromFreshRead(t *testing.T) {
	type race struct {
		name    string
		op      string // the operator's write to race
		kind    string
		prepare func(fx *fixture)
		compete func(fx *fixture) // the other writer's change
		check   func(fx *fixture) // the operator's write landed, and the other's survived
	}
	label := "example.com/other-writer"
	races := []race{
		{"StatefulSet update", "update", "StatefulSet",
			func(fx *fixture) { fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.RuntimeImage = newImage }) },
			func(fx *fixture) { s := fx.sts(); s.Labels[label] = "yes"; fx.must(env.Client.Update(fx.ctx, s)) },
			func(fx *fixture) {
				s := fx.sts()
				if s.Spec.Template.Spec.Containers[0].Image != newImage || s.Labels[label] != "yes" {
					fx.t.Fatal("the StatefulSet update must be retried from a fresh read, keeping the other writer's label")
				}
			}},
		{"status write", "status", "CelldFleet",
			func(fx *fixture) { fx.kube.down["f-0"] = true; fx.kube.step(fx.ctx) },
			func(fx *fixture) { fx.annotate(label, "yes") },
			func(fx *fixture) {
				f := fx.fleet()
				if f.Annotations[label] != "yes" || findCondition(f, celldv1alpha1.ConditionReady).Status != metav1.ConditionFalse {
					fx.t.Fatal("the status write must be retried from a fresh read after a conflict")
				}
			}},
		{"release of a replacement hold", "update", "Pod",
			func(fx *fixture) { fx.hold(fx.pods()["f-1"], fx.claims()["data-f-1"], "Prepared") },
			func(fx *fixture) {
				p := fx.pods()["f-1"]
				p.Labels[label] = "yes"
				fx.must(env.Client.Update(fx.ctx, p))
			},
			func(fx *fixture) {
				fx.requireNoHolds()
				if fx.pods()["f-1"].Labels[label] != "yes" {
					fx.t.Fatal("the hold release must be retried from a fresh read, keeping the other writer's label")
				}
			}},
	}
	for _, rc := range races {
		t.Run(rc.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.runningFleet(3, noPlacement)
			fx.reconcile()
			rc.prepare(fx)
			raced := false
			fx.rec.before = func(w write) {
				if w.op == rc.op && w.kind == rc.kind && !raced {
					raced = true
					rc.compete(fx)
				}
			}
			fx.reconcile()
			fx.rec.before = nil
			if !raced {
				t.Fatalf("test setup: the operator never issued the %s", rc.name)
			}
			rc.check(fx)
		})
	}
}

func (fx *fixture) must(err error) {
	fx.t.Helper()
	if err != nil {
		fx.t.Fatal(err)
	}
}
