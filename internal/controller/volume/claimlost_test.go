package volume_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// A replica whose backing claim went Lost (its PV deleted), on a node that
// is still there with its host ready and the replica still reporting Ready,
// is replaced at once, without the node delay. Its host is alive, so its
// claim in use is released only after the host's acknowledgement. envtest
// runs no PV controller: the test deletes the PV and sets the claim's phase
// as that controller would.
func TestClaimLostAloneTriggersReplacement(t *testing.T) {
	fx := newFixture(t)
	rv, r0, _, r2 := fx.healthyWithSpareNode()
	claim := fx.claimInUse(&r2, corev1.ClaimLost)
	fx.converge(rv.Name)
	got := fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAddingReplica)
	if msg := condition(got, storagev1alpha1.VolumeReplacing).Message; !strings.Contains(msg, "replaces "+r2.Name) {
		t.Errorf("Replacing message does not name %s: %s", r2.Name, msg)
	}
	r3, ok := fx.replica(rv.Name + "-r3")
	if !ok || r3.Spec.Replaces != r2.Name || r3.Spec.Node == r2.Spec.Node {
		t.Fatalf("no replacement of %s on another node: %v", r2.Name, names(fx.replicas(rv.Name)))
	}
	if vr, _ := fx.replica(r2.Name); vr.Annotations[storagev1alpha1.AnnotationUnavailableSince] != "" {
		t.Errorf("%s's node is there, yet it is recorded unavailable", r2.Name)
	}
	cur, _ := fx.replica(r0.Name)
	fx.hostPerformed(cur, cur.Spec.Membership)
	fx.hostReport(r3, storagev1alpha1.RoleFollower, true, false, 0)
	fx.converge(rv.Name)
	cur, _ = fx.replica(r0.Name)
	wantRequest(t, cur.Spec.Membership, storagev1alpha1.MembershipRemove, r2.Name, 2)
	fx.hostPerformed(cur, cur.Spec.Membership)
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonRemovingObjects)
	// The node is there: no waiver; the claim waits for the host.
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(claim), claim); err != nil || claim.DeletionTimestamp != nil ||
		!controllerutil.ContainsFinalizer(claim, storagev1alpha1.FinalizerBackingUse) {
		t.Fatalf("claim of %s released before its host acknowledged: %v %v %v", r2.Name, err, claim.DeletionTimestamp, claim.Finalizers)
	}
	fx.hostAcknowledgesRelease(rv, r2.Name, claim)
	fx.noDuplicates(rv.Name, 3)
}
