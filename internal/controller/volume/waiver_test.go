package volume_test

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
)

// setHostRunningUnready plays the kubelet reporting node's replica-host
// container running but not ready, as a live host whose readiness probe
// fails is reported.
func (fx *fixture) setHostRunningUnready(node string) {
	fx.t.Helper()
	p := &corev1.Pod{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: "node-" + node}, p); err != nil {
		fx.t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "csi-node", Ready: true},
		{Name: volume.ReplicaHostContainer, Ready: false,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now())}}}}
	if err := env.Client.Status().Update(fx.ctx, p); err != nil {
		fx.t.Fatal(err)
	}
}

// renewHostLeases plays the replica hosts of nodes renewing their Leases
// (internal/replica/kubehost/lease.go), for an hour.
func (fx *fixture) renewHostLeases(nodes ...string) {
	fx.t.Helper()
	for _, node := range nodes {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: fx.ns, Name: storagev1alpha1.HostLeaseName(node)}}
		_, err := controllerutil.CreateOrUpdate(fx.ctx, env.Client, l, func() error {
			holder, secs := node, int32(3600)
			now := metav1.NewMicroTime(time.Now())
			l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &holder, &secs, &now
			return nil
		})
		if err != nil {
			fx.t.Fatal(err)
		}
	}
}

// A replica that reports ReplicaStateLost on a node whose host still runs
// (it renews its Lease; its container unready, as a host with a lost worker
// may be) is replaced, and
// once its removal from the Raft configuration committed its claim in use
// waits for that host's release acknowledgement: the host is alive, so it
// must close the worker and unpublish before the claim is reclaimed.
func TestALostReplicaOnALiveHostWaitsForItsReleaseAcknowledgement(t *testing.T) {
	fx := newFixture(t)
	rv, r0, r1, r2 := fx.healthyWithSpareNode()
	fx.renewHostLeases(r0.Spec.Node, r1.Spec.Node, r2.Spec.Node, fx.prefix+"d")
	claim := fx.claimInUse(&r2, corev1.ClaimBound)
	fx.setHostRunningUnready(r2.Spec.Node)
	fx.hostReport(&r2, storagev1alpha1.RoleStopped, false, true, 0)
	fx.converge(rv.Name)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonAddingReplica)
	r3, ok := fx.replica(rv.Name + "-r3")
	if !ok || r3.Spec.Replaces != r2.Name {
		t.Fatalf("no replacement of the lost %s: %v", r2.Name, names(fx.replicas(rv.Name)))
	}
	fx.finishReplacementSteps(rv, r0.Name, r2.Name, r3.Name)
	fx.replacing(rv, metav1.ConditionTrue, storagev1alpha1.ReasonRemovingObjects)
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(claim), claim); err != nil || claim.DeletionTimestamp != nil ||
		!controllerutil.ContainsFinalizer(claim, storagev1alpha1.FinalizerBackingUse) {
		t.Fatalf("the claim of %s, whose host runs, was reclaimed before that host acknowledged its release (err %v, deleted %v, finalizers %v)",
			r2.Name, err, claim.DeletionTimestamp, claim.Finalizers)
	}
	fx.hostAcknowledgesRelease(rv, r2.Name, claim)
}

// finishReplacementSteps plays the coordinator's host adding repl, repl
// catching up and the coordinator removing lost.
func (fx *fixture) finishReplacementSteps(rv *storagev1alpha1.ReplicatedVolume, coordinator, lost, repl string) {
	fx.t.Helper()
	cur, _ := fx.replica(coordinator)
	fx.hostPerformed(cur, cur.Spec.Membership)
	vr, _ := fx.replica(repl)
	fx.hostReport(vr, storagev1alpha1.RoleFollower, true, false, 0)
	fx.converge(rv.Name)
	cur, _ = fx.replica(coordinator)
	wantRequest(fx.t, cur.Spec.Membership, storagev1alpha1.MembershipRemove, lost, cur.Spec.Membership.Generation)
	fx.hostPerformed(cur, cur.Spec.Membership)
	fx.converge(rv.Name)
}
