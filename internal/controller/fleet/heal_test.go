package fleet_test

import (
	"testing"
	"time"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/fleet"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const replaced = "MemberReplaced"

// wallClockPast waits (on a condition, with a deadline) until the API
// server's whole-second timestamps are more than skew past t, so a Pod
// created next is visibly newer than a claim created at t.
func wallClockPast(t *testing.T, at time.Time, skew time.Duration) {
	t.Helper()
	deadline := time.Now().Add(waitBudget)
	for !time.Now().Truncate(time.Second).After(at.Add(skew)) {
		if time.Now().After(deadline) {
			t.Fatal("the wall clock did not advance")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restartedOnOldDisks makes a running fleet whose Pods were restarted (by the
// StatefulSet's rolling update) well after their claims were created: the
// state of a long-running fleet.
func (fx *fixture) restartedOnOldDisks(n int32) {
	fx.t.Helper()
	fx.runningFleet(n, noPlacement)
	var newest time.Time
	for _, c := range fx.claims() {
		if c.CreationTimestamp.After(newest) {
			newest = c.CreationTimestamp.Time
		}
	}
	wallClockPast(fx.t, newest, time.Second)
	fx.edit(func(f *celldv1alpha1.CelldFleet) {
		f.Spec.Maintenance = &celldv1alpha1.Maintenance{RestartToken: "aged"}
	})
	fx.converge("restarted on the old disks", fx.settled(n))
	fx.advance(6 * time.Minute) // every member Ready for more than five minutes
	fx.reconcile()
	fx.rec.reset()
}

// memberGoesDown makes a member's celld stop answering readiness.
func (fx *fixture) memberGoesDown(name string) {
	fx.kube.down[name] = true
	fx.kube.step(fx.ctx)
	fx.reconcile()
}

func (fx *fixture) requireDiskKept(claim string, uid string) {
	fx.t.Helper()
	if got := fx.claimUIDs()[claim]; string(got) != uid {
		fx.t.Fatalf("disk %s (uid %s) must be kept; now %q", claim, uid, got)
	}
}

func (fx *fixture) requireDiskReplaced(claim string, uid string) {
	fx.t.Helper()
	if c, ok := fx.claims()[claim]; ok && string(c.UID) == uid && c.DeletionTimestamp == nil {
		fx.t.Fatalf("disk %s (uid %s) must have been replaced", claim, uid)
	}
}

// TestStrandedMemberPodForceDeletedTwoMinutesAfterGrace proves a member Pod
// still present more than two minutes after its termination grace ended is
// force-deleted with a UID precondition and keeps its disk, for every
// StatefulSet fleet (PersistentFleet and Ordered Bucket).
func TestStrandedMemberPodForceDeletedTwoMinutesAfterGrace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fleet func(ns string) *celldv1alpha1.CelldFleet
	}{
		{"PersistentFleet", func(ns string) *celldv1alpha1.CelldFleet { f := persistentFleet(ns, 3); noPlacement(f); return f }},
		{"Ordered Bucket", func(ns string) *celldv1alpha1.CelldFleet {
			return bucketFleet(ns, 3, celldv1alpha1.BucketWorkloadOrdered)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.create(tc.fleet(fx.ns))
			fx.converge("3 Ready members", fx.settled(3))
			disk := string(fx.claimUIDs()["data-f-1"])
			fx.kube.deadNodes[nodeOf("f-1")] = true
			pod := fx.pods()["f-1"]
			if err := env.Client.Delete(fx.ctx, pod); err != nil { // a drain: the kubelet never confirms
				t.Fatal(err)
			}
			pod = fx.pods()["f-1"]
			graceEnd := pod.DeletionTimestamp.Time
			fx.clock.SetTime(graceEnd.Add(2*time.Minute - time.Second))
			fx.reconcile()
			if _, still := fx.pods()["f-1"]; !still || len(fx.rec.deletesOf("Pod")) > 0 {
				t.Fatal("a member Pod must not be force-deleted before two minutes past its termination grace")
			}
			fx.clock.SetTime(graceEnd.Add(2*time.Minute + time.Second))
			fx.reconcile()
			dels := fx.rec.deletesOf("Pod")
			if len(dels) != 1 || !dels[0].force || !dels[0].preconditions || dels[0].uid != string(pod.UID) {
				t.Fatalf("the stranded Pod must be force-deleted once, with its UID as precondition; deletes: %+v", dels)
			}
			if p, ok := fx.pods()["f-1"]; ok && p.UID == pod.UID {
				t.Fatal("the stranded Pod is still present after the force-delete")
			}
			if !fx.evts.has("MemberForceDeleted") {
				t.Error("a force-delete must be recorded as a MemberForceDeleted event")
			}
			delete(fx.kube.deadNodes, nodeOf("f-1"))
			fx.converge("member f-1 back", fx.settled(3))
			fx.requireDiskKept("data-f-1", disk)
		})
	}
}

// TestStrandedMemberPodForceDeletedDuringFleetDeletion proves the stranded
// rule also runs while a fleet is deleted, so a member on a node that no
// longer answers does not hold the deletion (and the fleet's disks) forever.
func TestStrandedMemberPodForceDeletedDuringFleetDeletion(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	fx.kube.deadNodes[nodeOf("f-1")] = true
	fx.must(env.Client.Delete(fx.ctx, fx.fleet()))
	for range 3 {
		fx.reconcile()
		fx.kube.step(fx.ctx) // the StatefulSet goes; its Pods are deleted, f-1's kubelet never confirms
	}
	pod, ok := fx.pods()["f-1"]
	if !ok || pod.DeletionTimestamp == nil {
		t.Fatal("test setup: f-1 must be terminating on its dead node")
	}
	fx.clock.SetTime(pod.DeletionTimestamp.Add(2*time.Minute + time.Second))
	for range maxRounds {
		fx.reconcile()
		fx.kube.step(fx.ctx)
		if err := fx.get(fleetName, &celldv1alpha1.CelldFleet{}); apierrors.IsNotFound(err) {
			break
		}
	}
	if err := fx.get(fleetName, &celldv1alpha1.CelldFleet{}); !apierrors.IsNotFound(err) {
		t.Fatal("a stranded member Pod must not hold the fleet's deletion forever")
	}
	dels := fx.rec.deletesOf("Pod")
	if len(dels) != 1 || !dels[0].force || dels[0].uid != string(pod.UID) {
		t.Fatalf("the stranded Pod must be force-deleted once with its UID as precondition; deletes: %+v", dels)
	}
}

// TestLostVolumeReplacedThroughHandoff proves a member whose claim is Lost is
// replaced: its Pod deleted with UID and resourceVersion preconditions before
// its original claim, which is deleted with both preconditions; the hold is
// released and the member returns on a fresh disk.
func TestLostVolumeReplacedThroughHandoff(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	before := fx.claimUIDs()
	fx.kube.markLost(fx.ctx, "data-f-1")
	fx.reconcile()
	pods, claims := fx.rec.deletesOf("Pod"), fx.rec.deletesOf("PersistentVolumeClaim")
	if len(pods) != 1 || pods[0].name != "f-1" || !pods[0].preconditions || !pods[0].resourceVer {
		t.Fatalf("the lost member's Pod must be deleted once with UID and resourceVersion preconditions; got %+v", pods)
	}
	if len(claims) != 1 || claims[0].name != "data-f-1" || !claims[0].preconditions || !claims[0].resourceVer {
		t.Fatalf("the lost claim must be deleted once with UID and resourceVersion preconditions; got %+v", claims)
	}
	fx.requireNoHolds()
	fx.converge("member f-1 back on a fresh disk", fx.settled(3))
	fx.requireDiskReplaced("data-f-1", string(before["data-f-1"]))
	fx.requireDiskKept("data-f-0", string(before["data-f-0"]))
	fx.requireDiskKept("data-f-2", string(before["data-f-2"]))
	for _, e := range []string{"MemberDiskLost", replaced} {
		if !fx.evts.has(e) {
			t.Errorf("replacing a lost volume must record a %s event", e)
		}
	}
}

// TestLostVolumeWaitsUntilSchedulerDecidedOtherMembers proves the fresh-disk
// placement rule: no fresh disk while another member's Pod is undecided.
func TestLostVolumeWaitsUntilSchedulerDecidedOtherMembers(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	fx.kube.markLost(fx.ctx, "data-f-1")
	if err := env.Client.Delete(fx.ctx, fx.pods()["f-2"]); err != nil {
		t.Fatal(err)
	}
	fx.reconcile()
	if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) > 0 {
		t.Fatal("a fresh disk must wait until the scheduler has decided every other member's Pod (f-2 is being recreated)")
	}
	fx.kube.step(fx.ctx) // f-2 terminates
	fx.kube.step(fx.ctx) // f-2 is recreated and placed
	fx.reconcile()
	if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 1 {
		t.Fatalf("once every other member is decided the lost disk must be replaced; claim deletes: %v", d)
	}
}

// TestLostVolumeWaitsUntilStatefulSetObservedOperatorSpec proves the other
// half of the fresh-disk placement rule: no fresh disk while the StatefulSet
// has not observed the operator's spec, since a rollout is then about to
// recreate other members.
func TestLostVolumeWaitsUntilStatefulSetObservedOperatorSpec(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	before := fx.claimUIDs()
	fx.kube.markLost(fx.ctx, "data-f-1")
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.RuntimeImage = newImage })
	fx.reconcile() // writes the new template; the StatefulSet has not observed it
	if s := fx.sts(); s.Status.ObservedGeneration >= s.Generation {
		t.Fatal("test setup: the simulated StatefulSet controller must not have observed the new template yet")
	}
	if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) > 0 {
		t.Fatalf("a fresh disk must wait until the StatefulSet has observed the operator's spec; claim deletes: %v", d)
	}
	fx.converge("the lost volume replaced after the rollout", func() bool {
		return len(fx.rec.deletesOf("PersistentVolumeClaim")) == 1 && fx.settled(3)()
	})
	fx.requireDiskReplaced("data-f-1", string(before["data-f-1"]))
	fx.requireDiskKept("data-f-0", string(before["data-f-0"]))
	fx.requireDiskKept("data-f-2", string(before["data-f-2"]))
}

// TestTwoLostVolumesReplacedOneAtATime proves two members with lost volumes
// are both replaced, one at a time.
func TestTwoLostVolumesReplacedOneAtATime(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	fx.kube.markLost(fx.ctx, "data-f-0")
	fx.kube.markLost(fx.ctx, "data-f-2")
	fx.kube.down["f-0"], fx.kube.down["f-2"] = true, true
	fx.kube.step(fx.ctx)
	fx.reconcile()
	if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 1 || d[0].name != "data-f-0" {
		t.Fatalf("only one member may be replaced at a time, lowest ordinal first; claim deletes: %v", d)
	}
	fx.reconcile()
	if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 1 {
		t.Fatalf("the second lost volume must wait until the first member's Pod is decided again; claim deletes: %v", d)
	}
	delete(fx.kube.down, "f-0")
	delete(fx.kube.down, "f-2")
	fx.converge("both lost volumes replaced", func() bool {
		return len(fx.rec.deletesOf("PersistentVolumeClaim")) == 2 && fx.settled(3)()
	})
}

// TestMemberThatCannotComeBack proves the replacement of a member down for
// the replacement delay, and each exception of that rule.
func TestMemberThatCannotComeBack(t *testing.T) {
	t.Run("member waiting on its image is not replaced", func(t *testing.T) {
		fx := newFixture(t)
		fx.restartedOnOldDisks(3)
		fx.kube.waiting["f-1"] = "ImagePullBackOff"
		fx.memberGoesDown("f-1")
		fx.advance(testDelay + time.Minute)
		fx.reconcile()
		fx.requireNoMemberDeletes("a member waiting on its image")
	})
	t.Run("member waiting on its configuration is not replaced", func(t *testing.T) {
		fx := newFixture(t)
		fx.restartedOnOldDisks(3)
		fx.kube.waiting["f-1"] = "CreateContainerConfigError"
		fx.memberGoesDown("f-1")
		fx.advance(testDelay + time.Minute)
		fx.reconcile()
		fx.requireNoMemberDeletes("a member waiting on its configuration")
	})
	t.Run("member down while another was not ready for five minutes is not replaced", func(t *testing.T) {
		fx := newFixture(t)
		fx.restartedOnOldDisks(3)
		fx.memberGoesDown("f-1")
		fx.advance(testDelay + time.Minute)
		fx.memberGoesDown("f-2") // f-2 blinks: Ready again only just now
		delete(fx.kube.down, "f-2")
		fx.kube.step(fx.ctx)
		fx.advance(4 * time.Minute)
		fx.reconcile()
		fx.requireNoMemberDeletes("a replacement while another member has been Ready for only four minutes")
		fx.advance(2 * time.Minute)
		fx.reconcile()
		if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 1 {
			t.Fatalf("once every other member has been Ready for five minutes the down member must be replaced; claim deletes: %v", d)
		}
	})
	t.Run("two members down wait", func(t *testing.T) {
		fx := newFixture(t)
		fx.restartedOnOldDisks(3)
		fx.memberGoesDown("f-1")
		fx.memberGoesDown("f-2")
		fx.advance(3 * testDelay)
		fx.reconcile()
		fx.requireNoMemberDeletes("two members down (either disk may hold the only copy of some writes)")
	})
	t.Run("member down for the delay is replaced on a fresh disk, once", func(t *testing.T) {
		fx := newFixture(t)
		fx.restartedOnOldDisks(3)
		disk := string(fx.claimUIDs()["data-f-1"])
		fx.memberGoesDown("f-1")
		fx.advance(testDelay - time.Second)
		fx.reconcile()
		fx.requireNoMemberDeletes("the replacement delay")
		fx.advance(2 * time.Second)
		fx.reconcile()
		if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 1 || d[0].name != "data-f-1" {
			t.Fatalf("a member down for the replacement delay, with the rest Ready, must be replaced; claim deletes: %v", d)
		}
		if !fx.evts.has(replaced) {
			t.Error("a replacement must record a MemberReplaced event")
		}
		// Still down on its fresh disk: a new disk would not help.
		for range 4 {
			fx.kube.step(fx.ctx)
			fx.reconcile()
		}
		fx.requireDiskReplaced("data-f-1", disk)
		fx.advance(3 * testDelay)
		fx.reconcile()
		if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 1 {
			t.Fatalf("a member already on a disk created for its current Pod must not be replaced again; claim deletes: %v", d)
		}
	})
}

// TestMemberUnschedulableBlockedAfterDelay proves an unplaceable member is
// named in status at once, and Blocked with reason MemberUnschedulable names
// it when it is neither placed nor replaced by the end of the delay.
func TestMemberUnschedulableBlockedAfterDelay(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	fx.kube.down["f-0"] = true // a second member down: no replacement
	fx.kube.unschedulable["f-2"] = true
	if err := env.Client.Delete(fx.ctx, fx.pods()["f-2"]); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		fx.kube.step(fx.ctx)
	}
	fx.reconcile()
	if got := fx.fleet().Status.UnschedulableMembers; len(got) != 1 || got[0] != "f-2" {
		t.Fatalf("status must name the unschedulable member f-2; got %v", got)
	}
	fx.requireNotBlocked()
	fx.advance(testDelay + time.Second)
	fx.reconcile()
	fx.requireBlocked(celldv1alpha1.ReasonMemberUnschedulable, "f-2")
	if fx.fleet().Status.BlockedSince == nil {
		t.Error("status.blockedSince must be set while Blocked")
	}
	if !fx.evts.has("Blocked") {
		t.Error("becoming Blocked must record an event")
	}
}

// TestMemberReplacementDelayHasAOneMinuteFloor proves the delay option's
// default and minimum.
func TestMemberReplacementDelayHasAOneMinuteFloor(t *testing.T) {
	if _, err := fleet.New(env.Client, env.Scheme, fleet.Options{MemberReplacementDelay: 59 * time.Second}); err == nil {
		t.Error("a replacement delay below one minute must be refused")
	}
	if _, err := fleet.New(env.Client, env.Scheme, fleet.Options{MemberReplacementDelay: time.Minute}); err != nil {
		t.Errorf("a replacement delay of one minute must be accepted: %v", err)
	}
	if fleet.DefaultMemberReplacementDelay != 10*time.Minute {
		t.Errorf("the default replacement delay must be 10m; got %s", fleet.DefaultMemberReplacementDelay)
	}
}

// requireNoHolds fails if any Pod still carries a replacement hold.
func (fx *fixture) requireNoHolds() {
	fx.t.Helper()
	for _, p := range fx.pods() {
		if _, l := p.Labels[celldv1alpha1.LabelReplacementFleet]; l || hasString(p.Finalizers, celldv1alpha1.FinalizerReplacement) {
			fx.t.Fatalf("Pod %s still carries a replacement hold (label or finalizer)", p.Name)
		}
	}
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
