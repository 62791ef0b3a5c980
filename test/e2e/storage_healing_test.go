package e2e

// Storage healing scenarios (docs/local-cluster.md, "Storage bring-up";
// docs/decisions/0006-replica-replacement.md): a replica lost with its node
// (kubelet and replica-host stopped past --replica-replacement-delay, 1m in
// config/overlays/local) or with its backing PersistentVolume is replaced by
// a new replica on the spare, fourth node while the volume keeps serving on
// the other two; the storage controller killed mid-provision and
// mid-replacement converges without duplicates. Each runs runVolumeScenario:
// a fresh volume under continuous writes, every acknowledged operation read
// back, replica digests compared, and the storage controller's deletions
// limited to the lost replica's VolumeReplica, backing claim and Service.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/test/e2e/cluster"
)

// nodeLossTimeout covers the node going NotReady (node-monitor-grace-period
// 20 s on the local cluster), the replacement delay (1m), the new replica's
// rebuild and the lost one's removal and teardown.
const nodeLossTimeout = 6 * time.Minute

// retiredTracesTimeout bounds, from the lost node's return (its NODE Pod
// Ready with the replica-host restarted), the removal of everything the
// retired replica left on it: the host releases the publications of gone
// replicas at its start (kubehost/orphans.go), then the local driver's
// csi-provisioner, retrying the DeleteVolume it was refused while the
// volume was published, removes the directory and the PV.
const retiredTracesTimeout = time.Minute

// A replica's node lost: its kubelet stopped and its replica-host killed
// (the kubelet being down, nothing restarts it; the node's other containers
// serve no replica), longer than the replacement delay. The volume keeps
// serving on two replicas, robustness goes Degraded, the lost replica is
// replaced on the spare node and robustness returns to Healthy; then the
// node comes back, and within retiredTracesTimeout nothing of the retired
// replica is left: its API objects, PV, publications, mount, credentials and
// backing directory (storage_traces_test.go).
func TestStorageLostNodeReplicaIsReplacedOnTheSpareNode(t *testing.T) {
	requirePower(t, cluster.PowerDaemons, cluster.PowerHostProcesses, cluster.PowerHostDisks, cluster.PowerAuditLog)
	runVolumeScenario(t, "storage: replica node lost (kubelet and replica-host stopped) past the replacement delay; nothing of it left once the node is back", "q-nodeloss", func(s *volumeScenario) {
		// Neither the consumer's node (its Pod would be stranded) nor the
		// storage controller's (healing_test.go, memberAwayFromTheOperator:
		// its Pod would be evicted, a failover of the volume controller
		// rather than this fault).
		victim := s.replicaAwayFrom(s.pod.Spec.NodeName, storageControllerPod(s.ctx, s.t).Spec.NodeName)
		spare := s.spareNode()
		node := victim.Spec.Node
		kubelet := "kubelet-" + strings.TrimPrefix(node, "node-")
		host := s.nodePod(node)
		s.expectRetired(victim)
		traces := s.tracesOf(victim)
		s.requireTraces(traces)

		if err := env.Daemon(s.ctx, "kill", kubelet); err != nil {
			s.t.Fatal(err)
		}
		restarted := false
		defer func() {
			if !restarted {
				_ = env.Daemon(s.ctx, "start", kubelet)
			}
		}()
		if err := cluster.KillContainerProcess(host.UID, containerReplicaHost); err != nil {
			s.t.Fatalf("kill -9 the replica-host of %s: %v", node, err)
		}
		lostAt := time.Now()
		s.t.Logf("%s stopped and the replica-host on %s killed (replica %s, role %s); spare node %s",
			kubelet, node, victim.Name, victim.Status.Role, spare)

		s.serving("on two replicas")
		s.waitRobustness(storagev1alpha1.RobustnessDegraded, nodeLossTimeout)
		s.t.Logf("robustness Degraded %v after the node was lost", time.Since(lostAt).Round(time.Second))
		repl := s.waitReplaced(victim, nodeLossTimeout)
		s.res.Replacement = time.Since(lostAt).Round(time.Second)
		s.t.Logf("replica %s replaced by %s on %s, robustness Healthy, %v after the node was lost", victim.Name, repl.Name, repl.Spec.Node, s.res.Replacement)
		if repl.Spec.Node != spare {
			s.t.Errorf("the replacement %s runs on %s, not on %s, the only eligible node outside the volume's", repl.Name, repl.Spec.Node, spare)
		}

		if err := env.Daemon(s.ctx, "start", kubelet); err != nil {
			s.t.Fatal(err)
		}
		restarted = true
		waitFor(s.ctx, s.t, storageSettle, func() bool {
			p := s.findNodePod(node)
			return nodeReady(s, node) && p != nil && podReady(p) && restartsOf(p, containerReplicaHost) > restartsOf(host, containerReplicaHost)
		}, func() string {
			return node + " is not back: Node Ready and its NODE Pod Ready with the replica-host restarted"
		})
		back := time.Now()
		s.requireTracesGone(traces, retiredTracesTimeout)
		s.t.Logf("every one of the %d traces of %s on %s gone %v after the node returned",
			len(traces.traces), victim.Name, node, time.Since(back).Round(100*time.Millisecond))
		s.requireNoDuplicates()
	})
}

// A replica's backing PersistentVolume deleted (its finalizers dropped, so
// it is gone at once): the backing claim turns Lost and the replica is
// replaced at once on the spare node.
func TestStorageLostBackingVolumeReplicaIsReplaced(t *testing.T) {
	requirePower(t, cluster.PowerAuditLog)
	runVolumeScenario(t, "storage: a replica's backing PersistentVolume deleted (claim Lost)", "q-pvloss", func(s *volumeScenario) {
		victim := s.followers()[0]
		spare := s.spareNode()
		s.expectRetired(victim)
		lostAt := s.loseBackingVolume(victim)
		repl := s.waitReplaced(victim, storageSettle)
		s.res.Replacement = time.Since(lostAt).Round(time.Second)
		s.t.Logf("replica %s replaced by %s on %s, robustness Healthy, %v after its PersistentVolume was deleted",
			victim.Name, repl.Name, repl.Spec.Node, s.res.Replacement)
		if repl.Spec.Node != spare {
			s.t.Errorf("the replacement %s runs on %s, not on %s, the only eligible node outside the volume's", repl.Name, repl.Spec.Node, spare)
		}
		s.requireNoDuplicates()
	})
}

// The storage controller's manager killed (kill -9 of its container's
// process; the volume controller and the CSI controller) while a claim is
// provisioned, once its ReplicatedVolume exists and before the claim is
// bound, and again while a lost replica's replacement is in progress (the
// new VolumeReplica allocated, the lost one not yet retired): the claim
// binds, the replacement completes, and no VolumeReplica, port, backing
// claim, Service, ReplicatedVolume or PersistentVolume is duplicated.
func TestStorageManagerKilledMidProvisionAndMidReplacementConverges(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses, cluster.PowerAuditLog)
	runVolumeScenarioProvisionedUnder(t, "storage: manager killed mid-provision and mid-replacement", "q-mgrkill",
		func(s *volumeScenario, claim *corev1.PersistentVolumeClaim) {
			volume := "pvc-" + string(claim.UID) // the csi-provisioner's PV name, the ReplicatedVolume's
			waitFor(s.ctx, s.t, storageSettle, func() bool {
				return s.env().Get(s.ctx, client.ObjectKey{Name: volume}, &storagev1alpha1.ReplicatedVolume{}) == nil
			}, func() string { return "no ReplicatedVolume " + volume + " for claim " + claim.Name })
			now := &corev1.PersistentVolumeClaim{}
			if err := s.env().Get(s.ctx, client.ObjectKeyFromObject(claim), now); err != nil {
				s.t.Fatalf("get claim %s: %v", claim.Name, err)
			}
			if now.Status.Phase == corev1.ClaimBound {
				s.t.Fatalf("test setup: claim %s was bound before the manager could be killed mid-provision", claim.Name)
			}
			s.t.Logf("killing the manager mid-provision: ReplicatedVolume %s exists, claim %s", volume, now.Status.Phase)
			killStorageController(s.ctx, s.t)
		},
		func(s *volumeScenario) {
			s.requireNoDuplicates()
			victim := s.followers()[0]
			s.expectRetired(victim)
			lostAt := s.loseBackingVolume(victim)
			waitFor(s.ctx, s.t, storageSettle, func() bool { return s.replacementOf(victim.Name) != nil },
				func() string { return "no replacement of " + victim.Name + " allocated" })
			if apierrors.IsNotFound(s.env().Get(s.ctx, client.ObjectKeyFromObject(&victim), &storagev1alpha1.VolumeReplica{})) {
				s.t.Fatalf("test setup: %s was retired before the manager could be killed mid-replacement", victim.Name)
			}
			s.t.Logf("killing the manager mid-replacement: %s allocated, %s not retired yet", s.replacementOf(victim.Name).Name, victim.Name)
			killStorageController(s.ctx, s.t)
			repl := s.waitReplaced(victim, storageSettle)
			s.res.Replacement = time.Since(lostAt).Round(time.Second)
			s.t.Logf("replica %s replaced by %s on %s, %v after its PersistentVolume was deleted", victim.Name, repl.Name, repl.Spec.Node, s.res.Replacement)
			s.requireNoDuplicates()
		})
}

// replicaAwayFrom is a replica on none of the nodes, a follower where one
// qualifies.
func (s *volumeScenario) replicaAwayFrom(nodes ...string) storagev1alpha1.VolumeReplica {
	s.t.Helper()
	candidates := append(s.followers(), *s.coordinator())
	for _, r := range candidates {
		if !slices.Contains(nodes, r.Spec.Node) {
			return r
		}
	}
	s.t.Fatalf("every replica of %s runs on one of %v", s.volume, nodes)
	return storagev1alpha1.VolumeReplica{}
}

// spareNode is the one node that holds no replica of the volume: on the
// 4-node storage bring-up, where a lost replica's replacement must go.
func (s *volumeScenario) spareNode() string {
	s.t.Helper()
	var nodes corev1.NodeList
	if err := s.env().List(s.ctx, &nodes); err != nil {
		s.t.Fatalf("list nodes: %v", err)
	}
	used := map[string]bool{}
	for _, r := range s.replicas() {
		used[r.Spec.Node] = true
	}
	var spare []string
	for _, n := range nodes.Items {
		if !used[n.Name] {
			spare = append(spare, n.Name)
		}
	}
	if len(spare) != 1 {
		s.t.Fatalf("want exactly one node without a replica of %s (the storage bring-up has 4: CLUSTER_NODES=4), got %v", s.volume, spare)
	}
	return spare[0]
}

func nodeReady(s *volumeScenario, name string) bool {
	n := &corev1.Node{}
	if err := s.env().Get(s.ctx, client.ObjectKey{Name: name}, n); err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// expectRetired requires the manager to retire lost (decision 0006, step
// 5): delete its VolumeReplica, its backing claim and its Service, and
// nothing else.
func (s *volumeScenario) expectRetired(lost storagev1alpha1.VolumeReplica) {
	s.expect("volumereplicas/"+lost.Name, "persistentvolumeclaims/"+lost.Spec.BackingClaimName, "services/"+lost.Name)
}

// loseBackingVolume deletes the PersistentVolume behind the replica's
// backing claim, dropping its finalizers so it is gone at once, and waits
// until the claim is Lost (or gone); it returns when the volume was deleted.
func (s *volumeScenario) loseBackingVolume(r storagev1alpha1.VolumeReplica) time.Time {
	s.t.Helper()
	key := client.ObjectKey{Namespace: storageNamespace, Name: r.Spec.BackingClaimName}
	c := &corev1.PersistentVolumeClaim{}
	if err := s.env().Get(s.ctx, key, c); err != nil || c.Spec.VolumeName == "" {
		s.t.Fatalf("backing claim %s of %s and its volume: %v (volume %q)", key.Name, r.Name, err, c.Spec.VolumeName)
	}
	pv := &corev1.PersistentVolume{}
	if err := s.env().Get(s.ctx, client.ObjectKey{Name: c.Spec.VolumeName}, pv); err != nil {
		s.t.Fatalf("get PersistentVolume %s: %v", c.Spec.VolumeName, err)
	}
	at := time.Now()
	if err := s.env().Delete(s.ctx, pv, client.Preconditions{UID: &pv.UID}); err != nil {
		s.t.Fatalf("delete PersistentVolume %s: %v", pv.Name, err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if err := s.env().Patch(s.ctx, pv, patch); err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatalf("drop the finalizers of PersistentVolume %s: %v", pv.Name, err)
	}
	s.t.Logf("deleted PersistentVolume %s of replica %s (node %s, role %s)", pv.Name, r.Name, r.Spec.Node, r.Status.Role)
	waitFor(s.ctx, s.t, 2*time.Minute, func() bool {
		err := s.env().Get(s.ctx, key, c)
		return apierrors.IsNotFound(err) || err == nil && (c.Status.Phase == corev1.ClaimLost || c.UID != "" && c.DeletionTimestamp != nil)
	}, func() string {
		return fmt.Sprintf("backing claim %s of a deleted volume is %s, not Lost", key.Name, c.Status.Phase)
	})
	return at
}

// replacementOf is the VolumeReplica whose spec.replaces names lost, or nil.
func (s *volumeScenario) replacementOf(lost string) *storagev1alpha1.VolumeReplica {
	for _, r := range s.replicas() {
		if r.Spec.Replaces == lost {
			return &r
		}
	}
	return nil
}

// waitReplaced waits until lost is gone, a replica replacing it runs on
// another node and the volume's robustness is Healthy, and returns the
// replacement.
func (s *volumeScenario) waitReplaced(lost storagev1alpha1.VolumeReplica, within time.Duration) storagev1alpha1.VolumeReplica {
	s.t.Helper()
	var repl *storagev1alpha1.VolumeReplica
	rv := &storagev1alpha1.ReplicatedVolume{}
	waitFor(s.ctx, s.t, within, func() bool {
		repl = s.replacementOf(lost.Name)
		left := slices.ContainsFunc(s.replicas(), func(r storagev1alpha1.VolumeReplica) bool { return r.Name == lost.Name })
		if left || repl == nil || s.env().Get(s.ctx, client.ObjectKey{Name: s.volume}, rv) != nil {
			return false
		}
		return rv.Status.Robustness == storagev1alpha1.RobustnessHealthy
	}, func() string {
		replacing := meta.FindStatusCondition(rv.Status.Conditions, storagev1alpha1.VolumeReplacing.String())
		return fmt.Sprintf("replica %s (node %s) not replaced with the volume Healthy: robustness %s, Replacing %+v, replicas %s",
			lost.Name, lost.Spec.Node, rv.Status.Robustness, replacing, replicaSummary(s.replicas()))
	})
	if repl.Spec.Node == lost.Spec.Node {
		s.t.Errorf("the replacement %s runs on %s, the lost replica's node", repl.Name, repl.Spec.Node)
	}
	return *repl
}

// waitRobustness waits until the volume reports robustness want.
func (s *volumeScenario) waitRobustness(want storagev1alpha1.Robustness, within time.Duration) {
	s.t.Helper()
	rv := &storagev1alpha1.ReplicatedVolume{}
	waitFor(s.ctx, s.t, within, func() bool {
		return s.env().Get(s.ctx, client.ObjectKey{Name: s.volume}, rv) == nil && rv.Status.Robustness == want
	}, func() string {
		return fmt.Sprintf("volume %s is %s, not %s (replicas %s)", s.volume, rv.Status.Robustness, want, replicaSummary(s.replicas()))
	})
}

func replicaSummary(reps []storagev1alpha1.VolumeReplica) string {
	var parts []string
	for _, r := range reps {
		parts = append(parts, fmt.Sprintf("%s@%s %s ready=%v replaces=%q", r.Name, r.Spec.Node, r.Status.Role,
			meta.IsStatusConditionTrue(r.Status.Conditions, storagev1alpha1.ReplicaReady.String()), r.Spec.Replaces))
	}
	return strings.Join(parts, ", ")
}

// requireNoDuplicates fails unless the volume has exactly its requested
// replicas, on distinct nodes, each with one backing claim and one Service
// of its own name; no two VolumeReplicas of any volume share a node's port;
// and exactly one ReplicatedVolume and one PersistentVolume serve the claim.
func (s *volumeScenario) requireNoDuplicates() {
	s.t.Helper()
	rv := &storagev1alpha1.ReplicatedVolume{}
	if err := s.env().Get(s.ctx, client.ObjectKey{Name: s.volume}, rv); err != nil {
		s.t.Fatalf("get ReplicatedVolume %s: %v", s.volume, err)
	}
	reps := s.replicas()
	want := int(rv.Spec.Replicas)
	names, nodes := map[string]bool{}, map[string]string{}
	for _, r := range reps {
		if other, dup := nodes[r.Spec.Node]; dup {
			s.t.Errorf("replicas %s and %s of %s share node %s", other, r.Name, s.volume, r.Spec.Node)
		}
		nodes[r.Spec.Node], names[r.Spec.BackingClaimName] = r.Name, true
	}
	if len(reps) != want {
		s.t.Errorf("volume %s has %d VolumeReplicas, want %d: %s", s.volume, len(reps), want, replicaSummary(reps))
	}

	var all storagev1alpha1.VolumeReplicaList
	if err := s.env().List(s.ctx, &all, client.InNamespace(storageNamespace)); err != nil {
		s.t.Fatalf("list VolumeReplicas: %v", err)
	}
	ports := map[string]string{}
	for _, r := range all.Items {
		at := fmt.Sprintf("%s:%d", r.Spec.Node, r.Spec.Port)
		if other, dup := ports[at]; dup {
			s.t.Errorf("VolumeReplicas %s and %s share port %s", other, r.Name, at)
		}
		ports[at] = r.Name
	}

	ofVolume := client.MatchingLabels{storagev1alpha1.LabelVolume: s.volume}
	var claims corev1.PersistentVolumeClaimList
	var svcs corev1.ServiceList
	if err := s.env().List(s.ctx, &claims, client.InNamespace(storageNamespace), ofVolume); err != nil {
		s.t.Fatalf("list backing claims: %v", err)
	}
	if err := s.env().List(s.ctx, &svcs, client.InNamespace(storageNamespace), ofVolume); err != nil {
		s.t.Fatalf("list replica Services: %v", err)
	}
	for what, got := range map[string][]string{
		"backing claims": namesOf(claims.Items, func(c corev1.PersistentVolumeClaim) string { return c.Name }),
		"Services":       namesOf(svcs.Items, func(o corev1.Service) string { return o.Name }),
	} {
		extra := slices.DeleteFunc(slices.Clone(got), func(n string) bool { return names[n] })
		if len(got) != want || len(extra) > 0 {
			s.t.Errorf("volume %s has %s %v, want one per replica (%s)", s.volume, what, got, replicaSummary(reps))
		}
	}

	var rvs storagev1alpha1.ReplicatedVolumeList
	var pvs corev1.PersistentVolumeList
	if err := s.env().List(s.ctx, &rvs); err != nil {
		s.t.Fatalf("list ReplicatedVolumes: %v", err)
	}
	if err := s.env().List(s.ctx, &pvs); err != nil {
		s.t.Fatalf("list PersistentVolumes: %v", err)
	}
	nRV := len(slices.DeleteFunc(rvs.Items, func(v storagev1alpha1.ReplicatedVolume) bool {
		return v.Spec.Source.Namespace != storageTestNamespace || v.Spec.Source.Name != s.name
	}))
	nPV := len(slices.DeleteFunc(pvs.Items, func(v corev1.PersistentVolume) bool {
		return v.Spec.ClaimRef == nil || v.Spec.ClaimRef.Namespace != storageTestNamespace || v.Spec.ClaimRef.Name != s.name
	}))
	if nRV != 1 || nPV != 1 {
		s.t.Errorf("claim %s is served by %d ReplicatedVolumes and %d PersistentVolumes, want one each", s.name, nRV, nPV)
	}
}
