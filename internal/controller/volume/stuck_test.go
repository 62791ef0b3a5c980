package volume_test

// A replacement that cannot catch up is abandoned: removed from the Raft
// configuration, retired with UID preconditions, and another node is tried.
// envtest with the hosts played by status writes (hostReport, hostPerformed,
// hostFailed): a replica that reports ReplicaStateLost while it rebuilds, or
// one whose node never gets it caught up, cannot be produced on demand with
// real hosts in bounded time.

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// hostFailed plays the coordinator's host reporting that a membership change
// did not complete yet (the add of a non-voter still catching up).
func (fx *fixture) hostFailed(vr *storagev1alpha1.VolumeReplica, req *storagev1alpha1.MembershipChange, msg string) {
	fx.t.Helper()
	cur := &storagev1alpha1.VolumeReplica{}
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(vr), cur); err != nil {
		fx.t.Fatal(err)
	}
	cur.Status.Membership = &storagev1alpha1.MembershipOutcome{Generation: req.Generation, Operation: req.Operation,
		Member: req.Member.Name, Result: storagev1alpha1.MembershipFailed, Message: msg}
	if err := env.Client.Status().Update(fx.ctx, cur); err != nil {
		fx.t.Fatal(err)
	}
}

// request is the membership request on the coordinator r0.
func (fx *fixture) request(coordinator string) *storagev1alpha1.MembershipChange {
	fx.t.Helper()
	vr, ok := fx.replica(coordinator)
	if !ok || vr.Spec.Membership == nil {
		fx.t.Fatalf("no membership request on %s", coordinator)
	}
	return vr.Spec.Membership
}

func wantRequest(t *testing.T, got *storagev1alpha1.MembershipChange, op storagev1alpha1.MembershipOperation, member string, gen int64) {
	t.Helper()
	if got.Operation != op || got.Member.Name != member || got.Generation != gen {
		t.Fatalf("membership request %d %s %s, want %d %s %s", got.Generation, got.Operation, got.Member.Name, gen, op, member)
	}
}

// finishReplacement plays the hosts through the rest of a replacement by
// repl of lost: added, caught up, lost removed; then the volume is Healthy
// with three replicas.
func (fx *fixture) finishReplacement(rv *storagev1alpha1.ReplicatedVolume, coordinator, lost, repl string) {
	fx.t.Helper()
	cur, _ := fx.replica(coordinator)
	fx.hostPerformed(cur, cur.Spec.Membership)
	vr, _ := fx.replica(repl)
	fx.hostReport(vr, storagev1alpha1.RoleFollower, true, false, 0)
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonRemovingReplica)
	wantRequest(fx.t, fx.request(coordinator), storagev1alpha1.MembershipRemove, lost, fx.request(coordinator).Generation)
	cur, _ = fx.replica(coordinator)
	fx.hostPerformed(cur, cur.Spec.Membership)
	fx.converge(rv.Name)
	got := fx.replacing(rv, metav1.ConditionFalse, storagev1alpha1.ReasonNoReplacement)
	fx.noDuplicates(rv.Name, 3)
	if got.Status.Robustness != storagev1alpha1.RobustnessHealthy {
		fx.t.Errorf("robustness %s after the replacement, want Healthy", got.Status.Robustness)
	}
}

// The replica being added reports ReplicaStateLost while it rebuilds as a
// non-voter: it is removed from the configuration, retired, and a
// replacement goes to the fifth node, never back to the fourth. The manager
// restarts after every step.
func TestReplacementThatLosesItsStateIsAbandonedForAnotherNode(t *testing.T) {
	fx := newFixture(t)
	rv, r0, _, r2 := fx.healthyWithSpareNode()
	fx.node("e", "", true)
	fx.hostReport(&r2, storagev1alpha1.RoleStopped, false, true, 0)
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAddingReplica)
	r3, ok := fx.replica(rv.Name + "-r3")
	if !ok {
		t.Fatal("no replacement allocated")
	}
	firstNode := r3.Spec.Node
	req := fx.request(r0.Name)
	wantRequest(t, req, storagev1alpha1.MembershipAdd, r3.Name, 1)
	cur, _ := fx.replica(r0.Name)
	fx.hostFailed(cur, req, "the new replica catches up as a non-voter before it votes: 500 entries behind")
	fx.hostReport(r3, storagev1alpha1.RoleFollower, false, false, 90)
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAddingReplica)

	// It loses its state: abandoned.
	sinceAbandon := len(fx.rec.recorded())
	fx.hostReport(r3, storagev1alpha1.RoleStopped, false, true, 90)
	fx.restart()
	fx.converge(rv.Name)
	got := fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAbandoningReplacement)
	if msg := condition(got, storagev1alpha1.VolumeReplacing).Message; !strings.Contains(msg, r3.Name) || !strings.Contains(msg, "ReplicaStateLost") {
		t.Errorf("Replacing message does not say what is abandoned and why: %s", msg)
	}
	wantRequest(t, fx.request(r0.Name), storagev1alpha1.MembershipRemove, r3.Name, 2)
	if vr, ok := fx.replica(r3.Name); !ok || vr.DeletionTimestamp != nil {
		t.Fatalf("%s deleted before its removal from the configuration committed", r3.Name)
	}
	if old, _ := fx.replica(r2.Name); old.Annotations[storagev1alpha1.AnnotationAbandonedReplacements] != r3.Name+"@"+firstNode {
		t.Errorf("%s records abandoned replacements %q, want %q", r2.Name, old.Annotations[storagev1alpha1.AnnotationAbandonedReplacements], r3.Name+"@"+firstNode)
	}
	fx.restart()
	fx.converge(rv.Name)
	fx.noDuplicates(rv.Name, 4) // nothing new while the removal is pending

	// The removal committed: r3 retired, then r4 allocated on the fifth node.
	cur, _ = fx.replica(r0.Name)
	fx.hostPerformed(cur, cur.Spec.Membership)
	fx.restart()
	fx.converge(rv.Name)
	if _, ok := fx.replica(r3.Name); ok {
		t.Fatalf("abandoned %s still exists", r3.Name)
	}
	r4, ok := fx.replica(rv.Name + "-r4")
	if !ok {
		t.Fatalf("no second replacement allocated: %v", names(fx.replicas(rv.Name)))
	}
	if r4.Spec.Replaces != r2.Name || r4.Spec.Node == firstNode || r4.Spec.Node != fx.prefix+"e" {
		t.Fatalf("second replacement %s replaces %q on %s, want %s on %se", r4.Name, r4.Spec.Replaces, r4.Spec.Node, r2.Name, fx.prefix)
	}
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAddingReplica)
	wantRequest(t, fx.request(r0.Name), storagev1alpha1.MembershipAdd, r4.Name, 3)
	fx.noDuplicates(rv.Name, 4)
	fx.restart()
	fx.finishReplacement(rv, r0.Name, r2.Name, r4.Name)
	for _, w := range fx.rec.recorded()[sinceAbandon:] {
		if w.op == "delete" && w.uid == "" {
			t.Errorf("delete without UID precondition: %v", w)
		}
		if w.op == "create" && w.kind == "VolumeReplica" && w.name != r4.Name {
			t.Errorf("unexpected VolumeReplica created: %v", w)
		}
	}
}

// A replacement that stays behind past --replica-rebuild-timeout (its add
// asked for, never reported done: a non-voter) is abandoned the same way;
// one whose host goes away (its Lease expired) is
// abandoned after the replacement delay and its claim in use is reclaimed
// without its host's acknowledgement once it is out of the configuration.
func TestReplacementThatNeverCatchesUpIsAbandoned(t *testing.T) {
	fx := newFixture(t)
	fx.opts.ReplicaRebuildTimeout = 2 * time.Second
	fx.restart()
	rv, r0, _, r2 := fx.healthyWithSpareNode()
	fx.node("e", "", true)
	fx.hostReport(&r2, storagev1alpha1.RoleStopped, false, true, 0)
	fx.converge(rv.Name)
	r3, ok := fx.replica(rv.Name + "-r3")
	if !ok {
		t.Fatal("no replacement allocated")
	}
	fx.hostReport(r3, storagev1alpha1.RoleFollower, false, false, 95)
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAddingReplica)
	time.Sleep(3 * time.Second)
	fx.restart()
	fx.converge(rv.Name)
	got := fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAbandoningReplacement)
	if msg := condition(got, storagev1alpha1.VolumeReplacing).Message; !strings.Contains(msg, "--replica-rebuild-timeout") || !strings.Contains(msg, r3.Name) {
		t.Errorf("Replacing does not say the rebuild of %s timed out: %s", r3.Name, msg)
	}
	// Removal of the non-voter, then r4 on the other node.
	wantRequest(t, fx.request(r0.Name), storagev1alpha1.MembershipRemove, r3.Name, 2)
	cur, _ := fx.replica(r0.Name)
	fx.hostPerformed(cur, cur.Spec.Membership)
	fx.converge(rv.Name)
	if _, ok := fx.replica(r3.Name); ok {
		t.Fatalf("abandoned %s still exists", r3.Name)
	}
	r4, ok := fx.replica(rv.Name + "-r4")
	if !ok || r4.Spec.Node == r3.Spec.Node {
		t.Fatalf("second replacement not on another node: %v", names(fx.replicas(rv.Name)))
	}
	fx.opts.ReplicaRebuildTimeout = 0 // the default: r4 is judged by its node alone
	fx.restart()

	// r4's node goes away past the replacement delay, its claim in use.
	claim := fx.claimInUse(r4, corev1.ClaimBound)
	fx.hostRenewed(r4.Spec.Node, time.Now().Add(-31*time.Minute), 40*time.Second) // its host's last renewal
	fx.converge(rv.Name)
	got = fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAbandoningReplacement)
	if msg := condition(got, storagev1alpha1.VolumeReplacing).Message; !strings.Contains(msg, "last renewed its Lease") {
		t.Errorf("Replacing message does not say the node is gone: %s", msg)
	}
	req := fx.request(r0.Name)
	wantRequest(t, req, storagev1alpha1.MembershipRemove, r4.Name, 4)
	cur, _ = fx.replica(r0.Name)
	fx.hostPerformed(cur, req)
	fx.converge(rv.Name)
	if _, ok := fx.replica(r4.Name); ok {
		t.Fatalf("abandoned %s on a gone node still exists", r4.Name)
	}
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(claim), claim); err == nil &&
		(claim.DeletionTimestamp == nil || controllerutil.ContainsFinalizer(claim, storagev1alpha1.FinalizerBackingUse)) {
		t.Fatalf("claim of the abandoned replica on a gone node not reclaimed: finalizers %v", claim.Finalizers)
	}
	// Both spare nodes excluded (d abandoned, e gone): the lost replica
	// waits for an eligible node and says so.
	fx.replacing(rv, metav1.ConditionFalse, storagev1alpha1.ReasonAwaitingNode)
	fx.noDuplicates(rv.Name, 3)
}
