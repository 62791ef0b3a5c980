package fleet_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// handoffWrite names the writes of one replacement handoff, in order.
type handoffWrite struct {
	name, op, kind string
	nth            int // which write of that op and kind (1-based)
}

var handoffWrites = []handoffWrite{
	{"prepare the Pod", "update", "Pod", 1},
	{"delete the Pod (commitment point)", "delete", "Pod", 1},
	{"mark the record committed", "update", "Pod", 2},
	{"delete the recorded claim", "delete", "PersistentVolumeClaim", 1},
	{"release the hold", "update", "Pod", 3},
}

// injectAt makes the nth matching write suffer f.
func injectAt(hw handoffWrite, f fault) func(write) fault {
	seen := 0
	return func(w write) fault {
		if w.op != hw.op || w.kind != hw.kind {
			return passThrough
		}
		seen++
		if seen == hw.nth {
			return f
		}
		return passThrough
	}
}

// TestHandoffFaultInjection makes each API write of the handoff fail, and
// each lose its reply (the write happens, the reply does not arrive), with a
// member that recovers right after. A fresh reconciler must converge with no
// hold left; before an acknowledged Pod delete the member's disk is kept,
// after it the recorded claim and only it is deleted.
func TestHandoffFaultInjection(t *testing.T) {
	for i, hw := range handoffWrites {
		for _, f := range []fault{failWrite, loseReply} {
			// The disk may go only once the Pod delete was acknowledged and the
			// committed record written (its reply lost or not).
			committed := i >= 3 || (i == 2 && f == loseReply)
			name := fmt.Sprintf("%s %s", hw.name, map[fault]string{failWrite: "fails", loseReply: "loses its reply"}[f])
			t.Run(name, func(t *testing.T) {
				fx := newFixture(t)
				fx.restartedOnOldDisks(3)
				disk := string(fx.claimUIDs()["data-f-1"])
				fx.memberGoesDown("f-1")
				fx.advance(testDelay + time.Second)
				fx.rec.inject = injectAt(hw, f)
				if err := fx.tryReconcile(); err == nil && i < 4 {
					t.Fatalf("a reconcile whose handoff write %q failed must report an error", hw.name)
				}
				fx.rec.inject = nil
				delete(fx.kube.down, "f-1") // the member recovers, if its Pod is still there
				fx.kube.step(fx.ctx)
				fx.restartOperator()
				fx.converge("the fleet settled with no replacement hold", func() bool {
					return fx.settled(3)() && noHolds(fx)
				})
				if committed {
					fx.requireDiskReplaced("data-f-1", disk)
					for _, d := range fx.rec.deletesOf("PersistentVolumeClaim") {
						if d.uid != disk || !d.resourceVer {
							t.Fatalf("only the recorded claim (uid %s) may be deleted, with UID and resourceVersion preconditions; got a delete of uid %s", disk, d.uid)
						}
					}
				} else {
					fx.requireDiskKept("data-f-1", disk)
				}
			})
		}
	}
}

// TestRecoveredMemberDiskNeverDeleted proves a member that recovers between
// preparation and the Pod delete keeps its disk: the delete's
// resourceVersion precondition conflicts and the hold is released.
func TestRecoveredMemberDiskNeverDeleted(t *testing.T) {
	fx := newFixture(t)
	fx.restartedOnOldDisks(3)
	disk := string(fx.claimUIDs()["data-f-1"])
	fx.memberGoesDown("f-1")
	fx.advance(testDelay + time.Second)
	fx.rec.before = func(w write) {
		if w.op == "delete" && w.kind == "Pod" {
			delete(fx.kube.down, "f-1")
			fx.kube.step(fx.ctx) // the kubelet reports f-1 Ready: its resourceVersion moves
		}
	}
	if err := fx.tryReconcile(); err != nil {
		t.Fatalf("a replacement aborted at the commitment point is not an error: %v", err)
	}
	fx.rec.before = nil
	fx.requireDiskKept("data-f-1", disk)
	fx.requireNoHolds() // aborted at once, not left for the next reconcile
	if !fx.evts.has("ReplacementAborted") {
		t.Error("an aborted replacement must record a ReplacementAborted event")
	}
	fx.converge("the fleet settled with no replacement hold", func() bool { return fx.settled(3)() && noHolds(fx) })
	fx.requireDiskKept("data-f-1", disk)
	if p := fx.pods()["f-1"]; p == nil || !isReady(p) {
		t.Fatal("the recovered member must keep running")
	}
}

// TestMemberRecoveredAfterSelectionKeepsDisk proves the handoff acts on the
// Pod as the operator observed it when it chose to replace it: a member that
// recovers after that observation (a stale cache, or a recovery just after
// the read) makes the preparation conflict, and its disk is kept.
func TestMemberRecoveredAfterSelectionKeepsDisk(t *testing.T) {
	fx := newFixture(t)
	fx.restartedOnOldDisks(3)
	disk := string(fx.claimUIDs()["data-f-1"])
	fx.memberGoesDown("f-1")
	fx.advance(testDelay + time.Second)
	recovered := false
	fx.rec.afterList = func(list client.ObjectList) {
		if _, pods := list.(*corev1.PodList); pods && !recovered {
			recovered = true
			delete(fx.kube.down, "f-1")
			fx.kube.step(fx.ctx) // f-1 reports Ready right after the operator looked
		}
	}
	fx.reconcile()
	fx.rec.afterList = nil
	if !recovered {
		t.Fatal("test setup: the operator never listed the member Pods")
	}
	fx.requireDiskKept("data-f-1", disk)
	fx.requireNoHolds()
	if d := fx.rec.deletesOf("Pod"); len(d) != 0 {
		t.Fatalf("a member that recovered after it was selected must not be deleted; Pod deletes: %v", d)
	}
	if p := fx.pods()["f-1"]; p == nil || !isReady(p) {
		t.Fatal("the recovered member must keep running")
	}
}

// TestCommittedHandoffKeepsClaimChangedSincePreparation proves a claim that
// changed after the record was prepared is retained.
func TestCommittedHandoffKeepsClaimChangedSincePreparation(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	fx.kube.markLost(fx.ctx, "data-f-1")
	disk := string(fx.claimUIDs()["data-f-1"])
	fx.rec.before = func(w write) {
		if w.op == "delete" && w.kind == "PersistentVolumeClaim" {
			c := fx.claims()["data-f-1"]
			c.Annotations = map[string]string{"example.com/touched": "yes"}
			if err := env.Client.Update(fx.ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	fx.reconcile()
	fx.rec.before = nil
	fx.requireDiskKept("data-f-1", disk)
	fx.requireNoHolds()
	if !fx.evts.has("ReplacementAborted") {
		t.Error("keeping a changed claim must record a ReplacementAborted event")
	}
}

// TestCommittedHandoffDeletesClaimWhoseOnlyChangeIsControlPlaneBookkeeping
// reproduces what qualification found on a real Kubernetes 1.37 cluster: the
// PVC protection controller marks a claim Unused as soon as the handoff's Pod
// delete leaves it without a Pod, so the recorded resourceVersion always
// conflicts. A status-condition change alone must not keep a lost member on
// its dead disk forever; a change in what the claim means still does.
func TestCommittedHandoffDeletesClaimWhoseOnlyChangeIsControlPlaneBookkeeping(t *testing.T) {
	cases := []struct {
		name     string
		change   func(c *corev1.PersistentVolumeClaim)
		replaced bool
	}{
		{name: "Unused condition written by PVC protection", replaced: true, change: func(c *corev1.PersistentVolumeClaim) {
			c.Status.Conditions = append(c.Status.Conditions, corev1.PersistentVolumeClaimCondition{
				Type: "Unused", Status: corev1.ConditionTrue, Reason: "NoPodsUsingPVC",
				Message: "No pods are currently referencing this PVC", LastTransitionTime: metav1.Now()})
		}},
		{name: "phase changed: the lost volume came back", replaced: false, change: func(c *corev1.PersistentVolumeClaim) {
			c.Status.Phase = corev1.ClaimBound
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.runningFleet(3, noPlacement)
			fx.kube.markLost(fx.ctx, "data-f-1")
			disk := string(fx.claimUIDs()["data-f-1"])
			fx.rec.before = func(w write) {
				if w.op == "delete" && w.kind == "PersistentVolumeClaim" {
					fx.rec.before = nil // once, as the controller does when the Pod goes
					c := fx.claims()["data-f-1"]
					tc.change(c)
					if err := env.Client.Status().Update(fx.ctx, c); err != nil {
						t.Fatal(err)
					}
				}
			}
			fx.reconcile()
			fx.rec.before = nil
			fx.requireNoHolds()
			if !tc.replaced {
				fx.requireDiskKept("data-f-1", disk)
				return
			}
			c := fx.claims()["data-f-1"]
			if c != nil && string(c.UID) == disk && c.DeletionTimestamp == nil {
				t.Fatalf("claim data-f-1 whose only change was a status condition must be deleted so the member gets a fresh disk")
			}
		})
	}
}

// TestCommittedHandoffNeverDeletesClaimWithAnotherUID proves a committed
// record deletes only the recorded claim: a claim at the same name with a
// different UID (the recorded one went, another took its name) is never
// deleted, and the hold is released.
func TestCommittedHandoffNeverDeletesClaimWithAnotherUID(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	recorded := fx.claims()["data-f-1"]
	fx.hold(fx.pods()["f-1"], recorded, "Committed")
	// The recorded claim goes (its protection released by hand) and a new
	// claim takes its name.
	fx.must(env.Client.Delete(fx.ctx, recorded))
	gone := fx.claims()["data-f-1"]
	gone.Finalizers = nil
	fx.must(env.Client.Update(fx.ctx, gone))
	successor := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-f-1", Namespace: fx.ns,
		Labels: recorded.Labels}, Spec: recorded.Spec}
	successor.Spec.VolumeName = ""
	fx.must(env.Client.Create(fx.ctx, successor))
	fx.restartOperator()
	fx.reconcile()
	fx.requireNoHolds()
	fx.requireDiskKept("data-f-1", string(successor.UID))
	if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 0 {
		t.Fatalf("a claim at the recorded name with another UID must never be deleted; claim deletes: %v", d)
	}
}

// hold writes a replacement hold on a Pod, as a reconciler interrupted at the
// given phase would have left it.
func (fx *fixture) hold(pod *corev1.Pod, claim *corev1.PersistentVolumeClaim, phase string) {
	fx.t.Helper()
	f := fx.fleet()
	rec, _ := json.Marshal(map[string]string{
		"fleetUID": string(f.UID), "ownerUID": string(metav1.GetControllerOf(pod).UID), "claimName": claim.Name, "claimUID": string(claim.UID),
		"claimResourceVersion": claim.ResourceVersion, "phase": phase, "cause": "MemberDown",
	})
	pod.Labels[celldv1alpha1.LabelReplacementFleet] = string(f.UID)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[celldv1alpha1.AnnotationReplacement] = string(rec)
	pod.Finalizers = append(pod.Finalizers, celldv1alpha1.FinalizerReplacement)
	if err := env.Client.Update(fx.ctx, pod); err != nil {
		fx.t.Fatal(err)
	}
}

func noHolds(fx *fixture) bool {
	for _, p := range fx.pods() {
		if _, l := p.Labels[celldv1alpha1.LabelReplacementFleet]; l || hasString(p.Finalizers, celldv1alpha1.FinalizerReplacement) {
			return false
		}
	}
	return true
}

// TestNewReconcilerSettlesHoldsBeforeAnyOtherGate proves that a new
// reconciler aborts a prepared record (disk kept) and resumes a committed one
// (recorded claim deleted), before runtime validation: here the fleet's
// configuration has become invalid, and holds are still settled.
func TestNewReconcilerSettlesHoldsBeforeAnyOtherGate(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	pods, claims := fx.pods(), fx.claims()
	kept, gone := string(claims["data-f-0"].UID), string(claims["data-f-2"].UID)
	fx.hold(pods["f-0"], claims["data-f-0"], "Prepared")
	fx.hold(pods["f-2"], claims["data-f-2"], "Committed")
	if err := env.Client.Delete(fx.ctx, fx.pods()["f-2"]); err != nil { // the committed Pod delete
		t.Fatal(err)
	}
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.ServiceAccountName = "missing" })
	fx.restartOperator()
	fx.reconcile()
	fx.requireBlocked(celldv1alpha1.ReasonInvalidConfiguration)
	fx.requireNoHolds()
	fx.requireDiskKept("data-f-0", kept)
	fx.requireDiskReplaced("data-f-2", gone)
}

// TestHoldOutsideReplicaRangeIsSettled proves the private index finds a hold
// on a Pod above the StatefulSet's replica count: a committed hold on f-2,
// whose Pod is terminating, after the StatefulSet was contracted to 2.
func TestHoldOutsideReplicaRangeIsSettled(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	pods, claims := fx.pods(), fx.claims()
	fx.hold(pods["f-2"], claims["data-f-2"], "Committed")
	fx.must(env.Client.Delete(fx.ctx, fx.pods()["f-2"])) // the committed Pod delete; the hold keeps it
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 2 })
	s := fx.sts()
	s.Spec.Replicas = ptr.To(int32(2))
	fx.must(env.Client.Update(fx.ctx, s))
	if p, ok := fx.pods()["f-2"]; !ok || p.DeletionTimestamp == nil || *fx.sts().Spec.Replicas != 2 {
		t.Fatal("test setup: f-2 must be terminating, held, above a StatefulSet of 2 replicas")
	}
	fx.restartOperator()
	fx.reconcile()
	fx.requireNoHolds()
	fx.requireDiskReplaced("data-f-2", string(claims["data-f-2"].UID))
}

// TestHoldDriftAbortsDiskDeletionAndReleases proves a committed hold whose
// Pod lost the fleet label or its owner is released without a disk delete.
func TestHoldDriftAbortsDiskDeletionAndReleases(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drift func(p *corev1.Pod)
	}{
		{"fleet label changed", func(p *corev1.Pod) { p.Labels[celldv1alpha1.LabelFleet] = "other" }},
		{"owner removed", func(p *corev1.Pod) { p.OwnerReferences = nil }},
		// A StatefulSet of the same name, recreated after an orphaning
		// delete, adopted the Pod: its owner is not the one prepared against.
		{"owner replaced by a same-named StatefulSet", func(p *corev1.Pod) { p.OwnerReferences[0].UID = "recreated-statefulset" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.runningFleet(3, noPlacement)
			claims := fx.claims()
			fx.hold(fx.pods()["f-1"], claims["data-f-1"], "Committed")
			p := fx.pods()["f-1"]
			tc.drift(p)
			if err := env.Client.Update(fx.ctx, p); err != nil {
				t.Fatal(err)
			}
			fx.restartOperator()
			fx.reconcile()
			fx.requireNoHolds()
			fx.requireDiskKept("data-f-1", string(claims["data-f-1"].UID))
		})
	}
}

// TestPauseAndDeletionReleaseHoldsWithoutDiskDelete proves pausing the fleet
// releases its holds without starting a disk delete, and so does deleting it
// (before its own disk deletion starts).
func TestPauseAndDeletionReleaseHoldsWithoutDiskDelete(t *testing.T) {
	t.Run("pause", func(t *testing.T) {
		fx := newFixture(t)
		fx.runningFleet(3, noPlacement)
		claims := fx.claims()
		fx.hold(fx.pods()["f-1"], claims["data-f-1"], "Committed")
		fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Maintenance = &celldv1alpha1.Maintenance{Paused: true} })
		fx.reconcile()
		fx.requireNoHolds()
		fx.requireDiskKept("data-f-1", string(claims["data-f-1"].UID))
		if c := fx.condition(celldv1alpha1.ConditionMaintenancePaused); c.Status != metav1.ConditionTrue {
			t.Fatalf("a paused fleet must report MaintenancePaused=True; got %s", c.Status)
		}
	})
	t.Run("deletion", func(t *testing.T) {
		fx := newFixture(t)
		fx.runningFleet(3, noPlacement)
		claims := fx.claims()
		fx.hold(fx.pods()["f-1"], claims["data-f-1"], "Committed")
		if err := env.Client.Delete(fx.ctx, fx.fleet()); err != nil {
			t.Fatal(err)
		}
		fx.reconcile()
		fx.requireNoHolds()
		if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 0 {
			t.Fatalf("fleet deletion must release holds and delete compute before any disk; claim deletes: %v", d)
		}
	})
}
