package volume_test

// Replacement of a permanently lost replica against a real API server. The
// test plays the replica hosts' status writes (hostReport, hostPerformed)
// exactly as internal/replica/kubehost writes them; the real-host version of
// the whole protocol is internal/replica/kubehost's replacement test.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// hostPerformed plays the coordinator's host reporting a membership change.
func (fx *fixture) hostPerformed(vr *storagev1alpha1.VolumeReplica, req *storagev1alpha1.MembershipChange) {
	fx.t.Helper()
	cur := &storagev1alpha1.VolumeReplica{}
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(vr), cur); err != nil {
		fx.t.Fatal(err)
	}
	cur.Status.Membership = &storagev1alpha1.MembershipOutcome{Generation: req.Generation, Operation: req.Operation,
		Member: req.Member.Name, Result: storagev1alpha1.MembershipSucceeded}
	if err := env.Client.Status().Update(fx.ctx, cur); err != nil {
		fx.t.Fatal(err)
	}
}

func (fx *fixture) replica(name string) (*storagev1alpha1.VolumeReplica, bool) {
	fx.t.Helper()
	vr := &storagev1alpha1.VolumeReplica{}
	err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: name}, vr)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		fx.t.Fatal(err)
	}
	return vr, true
}

// noDuplicates: one replacement at most, every port distinct per node, one
// claim and one Service per live replica, no replica twice on a node.
func (fx *fixture) noDuplicates(volumeName string, wantReplicas int) {
	fx.t.Helper()
	vrs := fx.replicas(volumeName)
	if len(vrs) != wantReplicas {
		fx.t.Fatalf("%d VolumeReplicas, want %d: %v", len(vrs), wantReplicas, names(vrs))
	}
	nodes, ports, replacements := map[string]bool{}, map[string]bool{}, 0
	for _, vr := range vrs {
		if nodes[vr.Spec.Node] {
			fx.t.Errorf("two replicas on node %s", vr.Spec.Node)
		}
		nodes[vr.Spec.Node] = true
		p := fmt.Sprintf("%s:%d", vr.Spec.Node, vr.Spec.Port)
		if ports[p] {
			fx.t.Errorf("port %s handed out twice", p)
		}
		ports[p] = true
		if vr.Spec.Replaces != "" {
			replacements++
		}
	}
	if replacements > 1 {
		fx.t.Errorf("%d replacements at once: %v", replacements, names(vrs))
	}
	// A deleted claim waits for the played PVC protection controller
	// (converge) to go; being deleted is what counts.
	live := 0
	for _, c := range fx.claims(volumeName) {
		if c.DeletionTimestamp == nil {
			live++
		}
	}
	if live != wantReplicas {
		fx.t.Errorf("%d backing claims, want %d", live, wantReplicas)
	}
	if n := len(fx.services(volumeName)); n != wantReplicas {
		fx.t.Errorf("%d replica Services, want %d", n, wantReplicas)
	}
}

func names(vrs []storagev1alpha1.VolumeReplica) []string {
	var out []string
	for _, vr := range vrs {
		out = append(out, vr.Name)
	}
	return out
}

// claimInUse plays vr's host protecting its backing claim with the
// backing-use finalizer, and the PV controller setting the claim's phase.
func (fx *fixture) claimInUse(vr *storagev1alpha1.VolumeReplica, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
	fx.t.Helper()
	claim := &corev1.PersistentVolumeClaim{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Spec.BackingClaimName}, claim); err != nil {
		fx.t.Fatal(err)
	}
	controllerutil.AddFinalizer(claim, storagev1alpha1.FinalizerBackingUse)
	if err := env.Client.Update(fx.ctx, claim); err != nil {
		fx.t.Fatal(err)
	}
	claim.Status.Phase = phase
	if err := env.Client.Status().Update(fx.ctx, claim); err != nil {
		fx.t.Fatal(err)
	}
	return claim
}

// hostAcknowledgesRelease plays the host's release acknowledgement of the
// retired replica name (its claim's UID in status) and checks that the
// replacement then finishes and the replica goes.
func (fx *fixture) hostAcknowledgesRelease(rv *storagev1alpha1.ReplicatedVolume, name string, claim *corev1.PersistentVolumeClaim) {
	fx.t.Helper()
	old, _ := fx.replica(name)
	old.Status.ReleasedClaimUID = string(claim.UID)
	if err := env.Client.Status().Update(fx.ctx, old); err != nil {
		fx.t.Fatal(err)
	}
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionFalse, storagev1alpha1.ReasonNoReplacement)
	if _, ok := fx.replica(name); ok {
		fx.t.Fatalf("%s still exists after its host acknowledged", name)
	}
}

func (fx *fixture) replacing(rv *storagev1alpha1.ReplicatedVolume, status metav1.ConditionStatus, reason storagev1alpha1.ConditionReason) *storagev1alpha1.ReplicatedVolume {
	fx.t.Helper()
	got := fx.get(rv.Name)
	c := condition(got, storagev1alpha1.VolumeReplacing)
	if c == nil || c.Status != status || c.Reason != reason.String() {
		fx.t.Fatalf("Replacing = %+v, want %s/%s", c, status, reason)
	}
	return got
}

// healthyWithSpareNode is a provisioned volume whose three replicas report
// themselves a coordinator and two followers, and a fourth eligible node.
func (fx *fixture) healthyWithSpareNode() (*storagev1alpha1.ReplicatedVolume, storagev1alpha1.VolumeReplica, storagev1alpha1.VolumeReplica, storagev1alpha1.VolumeReplica) {
	fx.t.Helper()
	rv := fx.provisioned()
	fx.node("d", "", true)
	vrs := fx.replicas(rv.Name)
	fx.hostReport(&vrs[0], storagev1alpha1.RoleCoordinator, true, false, 0)
	fx.hostReport(&vrs[1], storagev1alpha1.RoleFollower, true, false, 0)
	fx.hostReport(&vrs[2], storagev1alpha1.RoleFollower, true, false, 0)
	return rv, vrs[0], vrs[1], vrs[2]
}

// A replica reporting ReplicaStateLost is replaced, never re-initialised:
// a new replica (next index, a fourth node) is allocated, added, rebuilt,
// the lost one removed from membership and then its objects. The manager is
// replaced by a fresh one after every step and converges without duplicate
// replicas, ports, claims or Services.
func TestLostReplicaIsReplacedAcrossManagerRestarts(t *testing.T) {
	fx := newFixture(t)
	rv, r0, r1, r2 := fx.healthyWithSpareNode()
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionFalse, storagev1alpha1.ReasonNoReplacement)

	fx.hostReport(&r2, storagev1alpha1.RoleStopped, false, true, 0)
	sinceLoss := len(fx.rec.recorded())
	fx.restart()
	fx.converge(rv.Name)
	got := fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAddingReplica)
	if got.Status.Robustness != storagev1alpha1.RobustnessDegraded {
		t.Errorf("robustness %s during the replacement, want Degraded", got.Status.Robustness)
	}
	newName := rv.Name + "-r3"
	r3, ok := fx.replica(newName)
	if !ok {
		t.Fatalf("no replacement %s allocated: %v", newName, names(fx.replicas(rv.Name)))
	}
	if r3.Spec.Replaces != r2.Name || r3.Spec.Node != fx.prefix+"d" {
		t.Fatalf("replacement %s replaces %q on %s, want %s on %sd", r3.Name, r3.Spec.Replaces, r3.Spec.Node, r2.Name, fx.prefix)
	}
	if !strings.Contains(condition(got, storagev1alpha1.VolumeReplacing).Message, r2.Name) {
		t.Errorf("Replacing message does not name %s: %s", r2.Name, condition(got, storagev1alpha1.VolumeReplacing).Message)
	}
	fx.noDuplicates(rv.Name, 4)
	for _, name := range []string{r0.Name, r1.Name, r3.Name} {
		vr, _ := fx.replica(name)
		if m := vr.Spec.Membership; m == nil || m.Operation != storagev1alpha1.MembershipAdd || m.Member.Name != newName || m.Generation != 1 {
			t.Fatalf("%s: membership request %+v, want generation 1 Add %s", name, m, newName)
		}
	}

	// Restart after the allocation and the add request: nothing new.
	fx.restart()
	fx.converge(rv.Name)
	fx.noDuplicates(rv.Name, 4)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAddingReplica)

	// The coordinator's host added it; it rebuilds, then catches up.
	cur, _ := fx.replica(r0.Name)
	fx.hostPerformed(cur, cur.Spec.Membership)
	fx.hostReport(r3, storagev1alpha1.RoleFollower, false, false, 80)
	fx.restart()
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonRebuildingReplica)
	fx.hostReport(r3, storagev1alpha1.RoleFollower, true, false, 0)
	fx.restart()
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonRemovingReplica)
	cur, _ = fx.replica(r0.Name)
	if m := cur.Spec.Membership; m == nil || m.Operation != storagev1alpha1.MembershipRemove || m.Member.Name != r2.Name || m.Generation != 2 {
		t.Fatalf("membership request %+v, want generation 2 Remove %s", m, r2.Name)
	}
	if old, ok := fx.replica(r2.Name); !ok || old.DeletionTimestamp != nil {
		t.Fatalf("%s deleted before its removal from membership committed", r2.Name)
	}
	fx.restart()
	fx.converge(rv.Name)
	fx.noDuplicates(rv.Name, 4)

	// Removal committed: the lost replica's objects go.
	fx.hostPerformed(cur, cur.Spec.Membership)
	fx.restart()
	fx.converge(rv.Name)
	got = fx.replacing(rv, metav1.ConditionFalse, storagev1alpha1.ReasonNoReplacement)
	if _, ok := fx.replica(r2.Name); ok {
		t.Fatalf("%s still exists after its removal from membership", r2.Name)
	}
	fx.noDuplicates(rv.Name, 3)
	if got.Status.Robustness != storagev1alpha1.RobustnessHealthy {
		t.Errorf("robustness %s after the replacement, want Healthy", got.Status.Robustness)
	}
	// Never re-initialised in place: no replica named like the lost one
	// was written again, and its spec was left as it was until deletion.
	for _, w := range fx.rec.recorded()[sinceLoss:] {
		if w.name == r2.Name && w.kind == "VolumeReplica" && w.op == "create" {
			t.Errorf("the lost replica %s was created again: %v", r2.Name, w)
		}
		if w.op == "delete" && w.uid == "" {
			t.Errorf("delete without UID precondition: %v", w)
		}
	}
}

// No replacement without quorum: two of three replicas lost, the controller
// allocates nothing and says why.
func TestNoReplacementWithoutQuorum(t *testing.T) {
	fx := newFixture(t)
	rv := fx.provisioned()
	fx.node("d", "", true)
	fx.node("e", "", true)
	vrs := fx.replicas(rv.Name)
	fx.hostReport(&vrs[0], storagev1alpha1.RoleCoordinator, true, false, 0)
	fx.hostReport(&vrs[1], storagev1alpha1.RoleStopped, false, true, 0)
	fx.hostReport(&vrs[2], storagev1alpha1.RoleStopped, false, true, 0)
	fx.converge(rv.Name)
	got := fx.replacing(rv, metav1.ConditionFalse, storagev1alpha1.ReasonAwaitingQuorum)
	msg := condition(got, storagev1alpha1.VolumeReplacing).Message
	if !strings.Contains(msg, "quorum") || !strings.Contains(msg, vrs[1].Name) {
		t.Errorf("Replacing message does not say why: %s", msg)
	}
	fx.noDuplicates(rv.Name, 3)
}

// A node whose host stopped renewing its Lease is replaced only after the
// delay; past it, the replacement runs, and the lost replica's claim in use
// is reclaimed without a release acknowledgement only once its removal from
// the Raft configuration committed.
func TestGoneNodeIsReplacedAfterTheDelayWithoutItsHost(t *testing.T) {
	var err error
	fx := newFixture(t)
	rv, r0, _, r2 := fx.healthyWithSpareNode()
	// r2's claim is in use: bound and protected by its host.
	claim := fx.claimInUse(&r2, corev1.ClaimBound)
	// Its host's last renewal: a 40s Lease that ran out a moment ago.
	fx.hostRenewed(r2.Spec.Node, time.Now().Add(-41*time.Second), 40*time.Second)
	fx.converge(rv.Name)
	got := fx.replacing(rv, metav1.ConditionFalse, storagev1alpha1.ReasonAwaitingDelay)
	if got.Status.Robustness != storagev1alpha1.RobustnessDegraded {
		// The gone host cannot correct the Ready it reported last.
		t.Errorf("robustness %s while a replica's node is gone, want Degraded", got.Status.Robustness)
	}
	fx.noDuplicates(rv.Name, 3)

	fx.hostRenewed(r2.Spec.Node, time.Now().Add(-31*time.Minute), 40*time.Second) // the Lease records it: gone past the default delay
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAddingReplica)
	r3, ok := fx.replica(rv.Name + "-r3")
	if !ok {
		t.Fatal("no replacement allocated past the delay")
	}
	cur, _ := fx.replica(r0.Name)
	fx.hostPerformed(cur, cur.Spec.Membership)
	fx.hostReport(r3, storagev1alpha1.RoleFollower, true, false, 0)
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonRemovingReplica)
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(claim), claim); err != nil || claim.DeletionTimestamp != nil {
		t.Fatalf("claim of %s touched before its removal from membership committed: %v %v", r2.Name, err, claim.DeletionTimestamp)
	}
	cur, _ = fx.replica(r0.Name)
	fx.hostPerformed(cur, cur.Spec.Membership)
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionFalse, storagev1alpha1.ReasonNoReplacement)
	if _, ok := fx.replica(r2.Name); ok {
		t.Fatalf("%s still exists", r2.Name)
	}
	err = env.Client.Get(fx.ctx, client.ObjectKeyFromObject(claim), claim)
	if err == nil && (claim.DeletionTimestamp == nil || controllerutil.ContainsFinalizer(claim, storagev1alpha1.FinalizerBackingUse)) {
		t.Fatalf("claim of the removed replica on a gone node not reclaimed: finalizers %v", claim.Finalizers)
	}
	if got := fx.get(rv.Name); got.Status.Robustness != storagev1alpha1.RobustnessHealthy {
		t.Errorf("robustness %s after the replacement, want Healthy", got.Status.Robustness)
	}
}
