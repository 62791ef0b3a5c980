package volume_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// provisioned is a converged volume of three replicas on three nodes.
func (fx *fixture) provisioned() *storagev1alpha1.ReplicatedVolume {
	fx.t.Helper()
	for _, n := range []string{"a", "b", "c"} {
		fx.node(n, "", true)
	}
	rv := fx.volume(3)
	fx.converge(rv.Name)
	return rv
}

// Robustness and Ready follow what the hosts report: all three members
// Healthy, two Degraded (still Ready: a quorum serves), one Faulted (not
// Ready), a lost replica Degraded with reason ReplicaLost.
func TestRobustnessFollowsReplicaStatus(t *testing.T) {
	fx := newFixture(t)
	rv := fx.provisioned()
	vrs := fx.replicas(rv.Name)
	fx.hostReport(&vrs[0], storagev1alpha1.RoleCoordinator, true, false, 0)
	fx.hostReport(&vrs[1], storagev1alpha1.RoleFollower, true, false, 3)
	fx.hostReport(&vrs[2], storagev1alpha1.RoleFollower, true, false, 0)
	check := func(step string, robustness storagev1alpha1.Robustness, ready metav1.ConditionStatus, readyReason, degradedReason storagev1alpha1.ConditionReason) {
		t.Helper()
		fx.converge(rv.Name)
		got := fx.get(rv.Name)
		if got.Status.Robustness != robustness {
			t.Errorf("%s: robustness %s, want %s", step, got.Status.Robustness, robustness)
		}
		if c := condition(got, storagev1alpha1.VolumeReady); c == nil || c.Status != ready || c.Reason != readyReason.String() {
			t.Errorf("%s: Ready = %+v, want %s/%s", step, c, ready, readyReason)
		}
		if c := condition(got, storagev1alpha1.VolumeDegraded); c == nil || c.Reason != degradedReason.String() {
			t.Errorf("%s: Degraded = %+v, want reason %s", step, c, degradedReason)
		}
	}
	check("three members", storagev1alpha1.RobustnessHealthy, metav1.ConditionTrue, storagev1alpha1.ReasonCoordinatorServing, storagev1alpha1.ReasonAllReplicasCurrent)
	got := fx.get(rv.Name)
	if got.Status.Coordinator != vrs[0].Name || len(got.Status.Replicas) != 3 {
		t.Errorf("coordinator %q with %d summaries, want %s with 3", got.Status.Coordinator, len(got.Status.Replicas), vrs[0].Name)
	}
	for _, s := range got.Status.Replicas {
		if s.Name == vrs[1].Name && s.Lag != 3 {
			t.Errorf("summary of %s lag %d, want 3", s.Name, s.Lag)
		}
	}

	fx.hostReport(&vrs[2], storagev1alpha1.RoleStopped, false, false, 0)
	check("one unavailable", storagev1alpha1.RobustnessDegraded, metav1.ConditionTrue, storagev1alpha1.ReasonCoordinatorServing, storagev1alpha1.ReasonReplicaUnavailable)

	fx.hostReport(&vrs[2], storagev1alpha1.RoleStopped, false, true, 0)
	check("one lost", storagev1alpha1.RobustnessDegraded, metav1.ConditionTrue, storagev1alpha1.ReasonCoordinatorServing, storagev1alpha1.ReasonReplicaLost)

	fx.hostReport(&vrs[1], storagev1alpha1.RoleCandidate, false, false, 0)
	check("quorum lost", storagev1alpha1.RobustnessFaulted, metav1.ConditionFalse, storagev1alpha1.ReasonQuorumLost, storagev1alpha1.ReasonReplicaLost)
}

// Deletion: the VolumeReplicas go first; a claim in use (bound, protected by
// its host's backing-use finalizer) is not touched until its host
// acknowledges its release with that claim's UID; a wrong UID is no
// acknowledgement; an API error stops the teardown with storage preserved;
// every delete carries the object's UID.
func TestDeletionWaitsForReleaseAcknowledgement(t *testing.T) {
	fx := newFixture(t)
	rv := fx.provisioned()
	// Play the hosts: bind every claim and protect it.
	for _, c := range fx.claims(rv.Name) {
		controllerutil.AddFinalizer(&c, storagev1alpha1.FinalizerBackingUse)
		if err := env.Client.Update(fx.ctx, &c); err != nil {
			t.Fatal(err)
		}
		c.Status.Phase = corev1.ClaimBound
		if err := env.Client.Status().Update(fx.ctx, &c); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Delete(fx.ctx, fx.get(rv.Name)); err != nil {
		t.Fatal(err)
	}
	start := len(fx.rec.recorded())
	fx.converge(rv.Name)

	got := fx.get(rv.Name)
	if c := condition(got, storagev1alpha1.VolumeDeleting); c == nil || c.Status != metav1.ConditionTrue || c.Reason != storagev1alpha1.ReasonReleasePending.String() {
		t.Fatalf("Deleting = %+v, want True/ReleasePending", c)
	}
	vrs := fx.replicas(rv.Name)
	if len(vrs) != 3 {
		t.Fatalf("%d VolumeReplicas left, want 3 held by the release finalizer", len(vrs))
	}
	for _, vr := range vrs {
		if vr.DeletionTimestamp == nil {
			t.Errorf("replica %s not deleted first", vr.Name)
		}
	}
	for _, c := range fx.claims(rv.Name) {
		if c.DeletionTimestamp != nil {
			t.Fatalf("claim %s deleted before its host acknowledged the release", c.Name)
		}
	}

	claimUID := map[string]string{}
	for _, c := range fx.claims(rv.Name) {
		claimUID[c.Name] = string(c.UID)
	}
	ack := func(vr storagev1alpha1.VolumeReplica, uid string) {
		t.Helper()
		cur := &storagev1alpha1.VolumeReplica{}
		if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(&vr), cur); err != nil {
			t.Fatal(err)
		}
		cur.Status.ReleasedClaimUID = uid
		if err := env.Client.Status().Update(fx.ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	// An acknowledgement of another claim identity is no acknowledgement.
	ack(vrs[0], "00000000-0000-0000-0000-000000000000")
	fx.converge(rv.Name)
	for _, c := range fx.claims(rv.Name) {
		if c.DeletionTimestamp != nil {
			t.Fatalf("claim %s deleted on an acknowledgement naming another UID", c.Name)
		}
	}

	// An API outage while reclaiming: storage preserved, reported, retried.
	ack(vrs[0], claimUID[vrs[0].Spec.BackingClaimName])
	fx.rec.inject = func(w write) bool { return w.kind == "PersistentVolumeClaim" }
	if _, err := fx.reconcile(rv.Name); err == nil {
		t.Fatal("reconcile with the claim writes failing returned no error")
	}
	fx.rec.inject = nil
	if c := condition(fx.get(rv.Name), storagev1alpha1.VolumeDeleting); c == nil || c.Reason != storagev1alpha1.ReasonAPIUncertain.String() {
		t.Fatalf("Deleting = %+v during the outage, want reason APIUncertain", c)
	}
	for _, c := range fx.claims(rv.Name) {
		if c.DeletionTimestamp != nil {
			t.Fatalf("claim %s deleted through a failing API", c.Name)
		}
	}
	fx.converge(rv.Name)
	if n := len(fx.replicas(rv.Name)); n != 2 {
		t.Fatalf("%d replicas after one acknowledgement, want 2 (only the acknowledged one released)", n)
	}
	for _, vr := range vrs[1:] {
		ack(vr, claimUID[vr.Spec.BackingClaimName])
	}
	fx.converge(rv.Name)

	err := env.Client.Get(fx.ctx, client.ObjectKey{Name: rv.Name}, &storagev1alpha1.ReplicatedVolume{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("volume still exists after every release was acknowledged: %v", err)
	}
	if _, ok := fx.secret(fx.managerNS, "rv-"+rv.Name+"-ca"); ok {
		t.Error("CA secret left behind")
	}
	if _, ok := fx.secret(fx.ns, rv.Name+"-mount"); ok {
		t.Error("mount secret left behind")
	}
	if n := len(fx.services(rv.Name)); n != 0 {
		t.Errorf("%d services left behind", n)
	}
	if cs := fx.claims(rv.Name); len(cs) != 0 {
		t.Errorf("%d backing claims left behind the volume", len(cs))
	}

	// Order and preconditions.
	firstClaimDelete, lastReplicaDelete := -1, -1
	for i, w := range fx.rec.recorded()[start:] {
		if w.op != "delete" {
			continue
		}
		if w.uid == "" {
			t.Errorf("%s carried no UID precondition", w)
		}
		switch w.kind {
		case "VolumeReplica":
			lastReplicaDelete = i
		case "PersistentVolumeClaim":
			if firstClaimDelete < 0 {
				firstClaimDelete = i
			}
		}
	}
	if firstClaimDelete < 0 || lastReplicaDelete < 0 || firstClaimDelete < lastReplicaDelete {
		t.Errorf("deletes out of order: last VolumeReplica delete at %d, first claim delete at %d; replicas go first", lastReplicaDelete, firstClaimDelete)
	}
}

// The volume is the last of its objects to go: a deleted backing claim that
// kube-controller-manager has not yet let go (kubernetes.io/pvc-protection)
// keeps its replica, and so the volume, which says what it waits for.
func TestVolumeOutlastsItsBackingClaims(t *testing.T) {
	fx := newFixture(t)
	rv := fx.provisioned()
	fx.holdProtection = true
	if err := env.Client.Delete(fx.ctx, fx.get(rv.Name)); err != nil {
		t.Fatal(err)
	}
	fx.converge(rv.Name)

	cs := fx.claims(rv.Name)
	if len(cs) != 3 {
		t.Fatalf("%d backing claims, want 3 held by kubernetes.io/pvc-protection", len(cs))
	}
	for _, c := range cs {
		if c.DeletionTimestamp == nil {
			t.Fatalf("claim %s not deleted: nothing needed a release acknowledgement", c.Name)
		}
	}
	err := env.Client.Get(fx.ctx, client.ObjectKey{Name: rv.Name}, &storagev1alpha1.ReplicatedVolume{})
	if apierrors.IsNotFound(err) {
		t.Fatal("the volume went before its backing claims: it must be the last of its objects")
	}
	if err != nil {
		t.Fatal(err)
	}
	c := condition(fx.get(rv.Name), storagev1alpha1.VolumeDeleting)
	if c == nil || c.Reason != storagev1alpha1.ReasonReleasePending.String() || !strings.Contains(c.Message, "backing claim "+cs[0].Name+" to be removed") {
		t.Errorf("Deleting = %+v, want ReleasePending naming the claims it waits for", c)
	}
	if n := len(fx.replicas(rv.Name)); n != 3 {
		t.Errorf("%d VolumeReplicas while their claims remain, want 3", n)
	}

	fx.holdProtection = false
	fx.converge(rv.Name)
	err = env.Client.Get(fx.ctx, client.ObjectKey{Name: rv.Name}, &storagev1alpha1.ReplicatedVolume{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("volume still exists once its claims are gone: %v", err)
	}
	if n := len(fx.claims(rv.Name)); n != 0 {
		t.Errorf("%d backing claims left", n)
	}
	if n := len(fx.replicas(rv.Name)); n != 0 {
		t.Errorf("%d VolumeReplicas left", n)
	}
}
