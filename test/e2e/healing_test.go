package e2e

// Self-healing (docs/fleet-operator.md, "Self-healing") under qualification
// (docs/local-cluster.md, "Qualification (`make e2e`)"): a deleted claim (the
// StatefulSet gives the member a fresh disk), a lost volume (the operator
// replaces it through the handoff), and a node whose kubelet stops while the
// workload keeps running (the operator force-deletes the stranded Pod and,
// after the replacement delay, replaces the member's disk).

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cellfleet/cellfleet/test/e2e/cluster"
)

// strandedTimeout covers the node going NotReady (~20 s), the taint eviction
// (30 s), the termination grace (10 s), the operator's two minutes, the
// replacement delay (1 m, config/overlays/local) and the five minutes every
// other member must have been Ready.
const strandedTimeout = 12 * time.Minute

func TestDeletedClaimIsReplacedWithAFreshDisk(t *testing.T) {
	runScenario(t, "deleted claim gets a fresh disk", persistentFleet(t, "q-claimdel"), func(s *scenario) {
		disks := s.claimUIDs()
		victim := s.claimOf(1)
		c := claim(s.ctx, t, victim)
		if err := env.Client.Delete(s.ctx, c); err != nil {
			t.Fatalf("delete claim %s: %v", victim, err)
		}
		// The claim stays until its Pod is gone (PVC protection); an administrator deletes the Pod.
		deletePod(s, s.member(1), nil)
		waitFor(s.ctx, t, 3*time.Minute, func() bool {
			now := claim(s.ctx, t, victim)
			return now != nil && now.UID != c.UID && now.Status.Phase == corev1.ClaimBound
		}, func() string { return "the StatefulSet recreates the member with a fresh, bound claim" })
		s.settle(replicas)
		s.requireDisksRetained(disks, victim)
	})
}

func TestLostVolumeIsReplacedByTheOperator(t *testing.T) {
	requirePower(t, cluster.PowerAuditLog) // the operator's deletes are the assertion
	runScenario(t, "lost volume replaced by the operator", persistentFleet(t, "q-lostvol"), func(s *scenario) {
		disks := s.claimUIDs()
		victim := s.claimOf(1)
		s.expect("pods/"+s.member(1), "persistentvolumeclaims/"+victim)
		// The volume behind the claim ceases to exist: its PV goes (finalizers and all).
		pv := s.pvOf(victim)
		if err := env.Client.Delete(s.ctx, pv); err != nil {
			t.Fatalf("delete volume %s: %v", pv.Name, err)
		}
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
		if err := env.Client.Patch(s.ctx, pv, patch); err != nil && !isNotFound(err) {
			t.Fatalf("drop the finalizers of volume %s: %v", pv.Name, err)
		}
		waitFor(s.ctx, t, 2*time.Minute, func() bool {
			c := claim(s.ctx, t, victim)
			return c == nil || c.Status.Phase == corev1.ClaimLost || c.UID != disks[victim]
		}, func() string { return "the claim of a deleted volume turns Lost" })
		waitFor(s.ctx, t, 5*time.Minute, func() bool {
			c := claim(s.ctx, t, victim)
			return c != nil && c.UID != disks[victim] && c.Status.Phase == corev1.ClaimBound
		}, func() string {
			return "the operator replaces the lost member's claim and the member returns on a fresh disk"
		})
		s.settle(replicas)
		s.requireDisksRetained(disks, victim)
	})
}

func TestStrandedPodOnAStoppedKubeletIsForceDeletedAndItsDiskReplaced(t *testing.T) {
	requirePower(t, cluster.PowerDaemons, cluster.PowerHostProcesses, cluster.PowerAuditLog)
	runScenario(t, "stopped kubelet: stranded Pod force-deleted, disk replaced", persistentFleet(t, "q-stranded"), func(s *scenario) {
		disks := s.claimUIDs()
		ordinal := s.memberAwayFromTheOperator()
		victim := s.claimOf(ordinal)
		node := s.nodeOf(ordinal)
		kubelet := "kubelet-" + node[len("node-"):]
		stranded := memberPod(s.ctx, t, s.member(ordinal))
		s.expect("pods/"+s.member(ordinal), "persistentvolumeclaims/"+victim)
		t.Logf("stopping %s on %s (member %s; the operator runs elsewhere)", kubelet, node, s.member(ordinal))

		if pids, err := processesOf(stranded); err != nil || len(pids) == 0 {
			t.Fatalf("test setup: the workload of %s must run before its kubelet stops (pids %v, %v)", stranded.Name, pids, err)
		}
		if err := env.Daemon(s.ctx, "kill", kubelet); err != nil {
			t.Fatal(err)
		}
		restarted := false
		defer func() {
			if !restarted {
				env.Daemon(s.ctx, "start", kubelet)
			}
		}()
		waitFor(s.ctx, t, strandedTimeout, func() bool {
			p := &corev1.Pod{}
			err := env.Client.Get(s.ctx, client.ObjectKeyFromObject(stranded), p)
			return isNotFound(err) || (err == nil && p.UID != stranded.UID)
		}, func() string {
			return "the operator force-deletes a member Pod stranded on a node that no longer answers"
		})
		// The kubelet is down, so nothing on the node stopped the workload: the
		// Pod object went by the operator's grace-0 delete, not by the kubelet.
		if pids, err := processesOf(stranded); err != nil || len(pids) == 0 {
			t.Fatalf("the workload of %s must still run on the stopped node when its Pod is force-deleted (pids %v, %v)", stranded.Name, pids, err)
		}
		s.requireForceDeleteBeforeClaimDelete("pods/"+s.member(ordinal), "persistentvolumeclaims/"+victim)
		waitFor(s.ctx, t, strandedTimeout, func() bool {
			c := claim(s.ctx, t, victim)
			return c == nil || c.UID != disks[victim]
		}, func() string {
			return "after the replacement delay, with every other member Ready, the operator replaces the member's disk"
		})
		// The node returns; the member comes back on its fresh disk and recovers from its peers.
		if err := env.Daemon(s.ctx, "start", kubelet); err != nil {
			t.Fatal(err)
		}
		restarted = true
		s.settle(replicas)
		s.requireDisksRetained(disks, victim)
	})
}

// memberAwayFromTheOperator is the ordinal of a member whose node does not run
// the manager. A stopped kubelet strands every Pod on its node, the manager's
// too: the taint eviction deletes the manager Pod, its process keeps running,
// and 60 s after the deletion the API server rejects its bound ServiceAccount
// token (401 Unauthorized), so it loses its Lease and a new manager Pod takes
// over. That is correct fencing, but it is a different fault: stopping the
// operator's own node here would make this scenario test operator failover in
// one run of three, depending on where the scheduler placed the manager.
func (s *scenario) memberAwayFromTheOperator() int {
	s.t.Helper()
	operatorNode := managerPod(s.ctx, s.t).Spec.NodeName
	for _, ordinal := range []int{1, 2, 0} {
		if s.nodeOf(ordinal) != operatorNode {
			return ordinal
		}
	}
	s.t.Fatalf("every member runs on %s, the operator's node: the fleet's placement must spread them", operatorNode)
	return -1
}

// requireForceDeleteBeforeClaimDelete fails unless the operator's first
// delete of the stranded Pod (the audit log) precedes any delete of the
// member's claim: the force-delete, not the later handoff, removed the Pod.
// The Pod was still on a node whose kubelet was stopped, so only a grace-0
// delete could remove it (the audit log records deletes at Metadata level,
// without their grace period).
func (s *scenario) requireForceDeleteBeforeClaimDelete(pod, claim string) {
	s.t.Helper()
	got, err := s.operatorDeletions()
	if err != nil {
		s.t.Fatal(err)
	}
	podAt, claimAt := slices.Index(got, pod), slices.Index(got, claim)
	if podAt < 0 {
		s.t.Fatalf("the operator must force-delete %s (its deletions: %v)", pod, got)
	}
	if claimAt >= 0 && claimAt < podAt {
		s.t.Fatalf("the operator deleted %s before it force-deleted %s (its deletions: %v)", claim, pod, got)
	}
}
