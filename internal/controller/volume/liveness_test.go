package volume_test

// Node liveness from the replica hosts' Leases (docs/decisions/0011-node-leases.md),
// against a real API server; the hosts' status writes and Lease renewals
// are played (hostReport, hostRenewed) exactly as internal/replica/kubehost
// writes them.

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// threeVolumes provisions three 3-replica volumes on nodes a, b and c, all
// reported healthy (r0 coordinator), and a spare node d.
func (fx *fixture) threeVolumes() []*storagev1alpha1.ReplicatedVolume {
	fx.t.Helper()
	for _, n := range []string{"a", "b", "c"} {
		fx.node(n, "", true)
	}
	var rvs []*storagev1alpha1.ReplicatedVolume
	for range 3 {
		rv := fx.volume(3)
		fx.converge(rv.Name)
		vrs := fx.replicas(rv.Name)
		fx.hostReport(&vrs[0], storagev1alpha1.RoleCoordinator, true, false, 0)
		fx.hostReport(&vrs[1], storagev1alpha1.RoleFollower, true, false, 0)
		fx.hostReport(&vrs[2], storagev1alpha1.RoleFollower, true, false, 0)
		rvs = append(rvs, rv)
	}
	fx.node("d", "", true)
	return rvs
}

// onNode is the volume's replica on node.
func (fx *fixture) onNode(volumeName, node string) storagev1alpha1.VolumeReplica {
	fx.t.Helper()
	for _, vr := range fx.replicas(volumeName) {
		if vr.Spec.Node == node {
			return vr
		}
	}
	fx.t.Fatalf("volume %s has no replica on node %s", volumeName, node)
	return storagev1alpha1.VolumeReplica{}
}

// replacementOf is the replica replacing old, if one was allocated.
func (fx *fixture) replacementOf(volumeName, old string) (storagev1alpha1.VolumeReplica, bool) {
	for _, vr := range fx.replicas(volumeName) {
		if vr.Spec.Replaces == old {
			return vr, true
		}
	}
	return storagev1alpha1.VolumeReplica{}, false
}

// One host has a lost worker and another rebuilding for longer than the
// replacement delay; its container has been unready all that time (its
// probe counted every worker, before docs/decisions/0011-node-leases.md) and the manager
// recorded the node unavailable back then. Its Lease is renewed: only the
// lost replica is replaced, judged on its own status; the rebuilding one
// and the healthy one on that node are not, and count as ready members
// again.
func TestAHostRenewingItsLeaseKeepsItsHealthyReplicasWhateverItsReadiness(t *testing.T) {
	fx := newFixture(t)
	rvs := fx.threeVolumes()
	sick := fx.prefix + "c"
	fx.setHostReady(sick, false)
	longAgo := time.Now().Add(-31 * time.Minute).UTC().Format(time.RFC3339)
	for _, rv := range rvs {
		vr := fx.onNode(rv.Name, sick)
		cur, _ := fx.replica(vr.Name)
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[storagev1alpha1.AnnotationUnavailableSince] = longAgo
		if err := env.Client.Update(fx.ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	lost, rebuilding, healthy := fx.onNode(rvs[0].Name, sick), fx.onNode(rvs[1].Name, sick), fx.onNode(rvs[2].Name, sick)
	fx.hostReport(&lost, storagev1alpha1.RoleStopped, false, true, 0)
	fx.hostReport(&rebuilding, storagev1alpha1.RoleFollower, false, false, 90)

	for _, rv := range rvs {
		fx.converge(rv.Name)
	}
	if _, ok := fx.replacementOf(rvs[0].Name, lost.Name); !ok {
		t.Errorf("the replica %s reporting ReplicaStateLost was not replaced", lost.Name)
	}
	for _, vr := range []storagev1alpha1.VolumeReplica{rebuilding, healthy} {
		if repl, ok := fx.replacementOf(vr.Spec.VolumeName, vr.Name); ok {
			t.Errorf("replica %s on node %s, whose host renews its Lease, was replaced by %s: one sick worker cascaded to the node's other replicas",
				vr.Name, sick, repl.Name)
		}
		fx.replacing(fx.get(vr.Spec.VolumeName), metav1.ConditionFalse, storagev1alpha1.ReasonNoReplacement)
		if cur, _ := fx.replica(vr.Name); cur.Annotations[storagev1alpha1.AnnotationUnavailableSince] != "" {
			t.Errorf("replica %s still recorded unavailable while its host renews its Lease", vr.Name)
		}
	}
	if got := fx.get(rvs[2].Name); got.Status.Robustness != storagev1alpha1.RobustnessHealthy {
		t.Errorf("volume %s, whose replica on %s is healthy, is %s", rvs[2].Name, sick, got.Status.Robustness)
	}
}

// A node whose host stopped renewing its Lease, past the replacement delay,
// has its replicas replaced; at most --max-concurrent-replacements at once
// across the cluster, the others waiting with AwaitingReplacementSlot until
// one finishes.
func TestAnExpiredLeasesReplicasAreReplacedWithinTheClusterBound(t *testing.T) {
	fx := newFixture(t)
	fx.opts.MaxConcurrentReplacements = 2
	fx.restart()
	rvs := fx.threeVolumes()
	dead := fx.prefix + "c"
	fx.hostRenewed(dead, time.Now().Add(-31*time.Minute), 40*time.Second)

	for _, rv := range rvs {
		fx.converge(rv.Name)
	}
	var started, waiting []*storagev1alpha1.ReplicatedVolume
	for _, rv := range rvs {
		if _, ok := fx.replacementOf(rv.Name, fx.onNode(rv.Name, dead).Name); ok {
			started = append(started, rv)
		} else {
			waiting = append(waiting, rv)
		}
	}
	if len(started) != 2 {
		t.Fatalf("%d of 3 volumes on the node whose Lease expired started a replacement, want exactly --max-concurrent-replacements=2", len(started))
	}
	got := fx.replacing(waiting[0], metav1.ConditionFalse, storagev1alpha1.ReasonAwaitingReplacementSlot)
	if msg := condition(got, storagev1alpha1.VolumeReplacing).Message; !strings.Contains(msg, "--max-concurrent-replacements=2") {
		t.Errorf("Replacing message does not name the bound: %s", msg)
	}

	// One replacement finishes: the waiting volume takes its slot.
	first := started[0]
	old := fx.onNode(first.Name, dead)
	repl, _ := fx.replacementOf(first.Name, old.Name)
	coord, _ := fx.replica(fx.replicas(first.Name)[0].Name)
	fx.hostPerformed(coord, coord.Spec.Membership)
	fx.hostReport(&repl, storagev1alpha1.RoleFollower, true, false, 0)
	fx.converge(first.Name)
	coord, _ = fx.replica(coord.Name)
	fx.hostPerformed(coord, coord.Spec.Membership)
	fx.converge(first.Name)
	fx.replacing(first, metav1.ConditionFalse, storagev1alpha1.ReasonNoReplacement)
	fx.converge(waiting[0].Name)
	if _, ok := fx.replacementOf(waiting[0].Name, fx.onNode(waiting[0].Name, dead).Name); !ok {
		t.Fatalf("volume %s did not start its replacement once a slot was free", waiting[0].Name)
	}
}
