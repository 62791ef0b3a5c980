package e2e

// Storage fault scenarios (docs/local-cluster.md, "Storage bring-up"): each
// runs runVolumeScenario, a fresh volume under continuous writes, and injects
// one fault on this host.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/test/e2e/cluster"
	"github.com/cellfleet/cellfleet/test/e2e/storageload"
)

// NODE Pod containers the scenarios restart.
const (
	containerReplicaHost   = "replica-host"
	containerCSINodePlugin = "csi-node-replicated" // the replicated driver's node plugin
	containerMountOwner    = "mount-owner"
)

func TestStorageProvisioningAndCoordinatorKillKeepEveryWrite(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses)
	runVolumeScenario(t, "storage: provisioning, kill -9 of the coordinator's replica-host", "q-coord", func(s *volumeScenario) {
		s.killReplicaHosts(*s.coordinator())
	})
}

func TestStorageFollowerHostKillKeepsEveryWrite(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses)
	runVolumeScenario(t, "storage: kill -9 of a follower's replica-host", "q-follower", func(s *volumeScenario) {
		s.killReplicaHosts(s.followers()[0])
	})
}

// Two of three replica-hosts killed at once: quorum is lost until the kubelet
// restarts them; writes may fail meanwhile, nothing acknowledged is lost and
// service resumes.
func TestStorageTwoHostsKilledAtOnceKeepEveryWrite(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses)
	runVolumeScenario(t, "storage: kill -9 of two replica-hosts at once (quorum lost)", "q-two", func(s *volumeScenario) {
		before := s.gen.Stats()
		s.killReplicaHosts(*s.coordinator(), s.followers()[0])
		s.t.Logf("while quorum was lost: %d operations failed", s.gen.Stats().Failed-before.Failed)
	})
}

// The replicated driver's node plugin restarted while the application
// writes: the FUSE session belongs to the mount owner, so the mount
// survives and no error reaches the application.
func TestStorageCSINodePluginRestartIsInvisible(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses)
	runVolumeScenario(t, "storage: csi-node plugin container killed while writing", "q-plugin", func(s *volumeScenario) {
		before := s.gen.Stats()
		s.killNodeContainer(s.pod.Spec.NodeName, containerCSINodePlugin)
		s.serving("after the plugin restarted")
		if after := s.gen.Stats(); after.Failed != before.Failed {
			s.t.Errorf("%d operations failed across the plugin restart (last: %s): no error may reach the application",
				after.Failed-before.Failed, after.LastFailure)
		}
		st, err := storageload.FixtureStats(s.ctx, s.target(s.pod))
		if err != nil {
			s.t.Fatalf("fixture stats: %v", err)
		}
		if st.Errors != 0 {
			s.t.Errorf("the application saw %d I/O errors across the plugin restart (last: %s)", st.Errors, st.LastError)
		}
	})
}

// The mount owner killed: the application sees errors, never wrong data; a
// Pod restart remounts through unpublish/unstage and reads everything
// acknowledged (open descriptors are not recovered: docs/fuse.md, "The mount owner").
func TestStorageMountOwnerKillShowsErrorsNotWrongData(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses)
	runVolumeScenario(t, "storage: mount owner killed, Pod restarted", "q-owner", func(s *volumeScenario) {
		s.killNodeContainer(s.pod.Spec.NodeName, containerMountOwner)
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		defer cancel()
		if err := s.gen.WaitFailing(ctx); err != nil {
			s.t.Fatalf("no operation failed within a minute of the mount owner's kill: the fault did not reach the application (%v)", err)
		}
		s.restartWriter()
	})
}

// The whole NODE Pod of the consumer's node deleted (a NODE Pod replacement
// ends the node's FUSE sessions, docs/architecture.md, "Replicated volume"):
// the mount owner goes with it, so the application sees errors, never wrong
// data; the DaemonSet starts a new NODE Pod, and a Pod restart remounts
// through unpublish/unstage and reads everything acknowledged.
func TestStorageNodePodDeletionShowsErrorsNotWrongData(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses)
	runVolumeScenario(t, "storage: NODE Pod of the consumer's node deleted, Pod restarted", "q-nodepod", func(s *volumeScenario) {
		node := s.pod.Spec.NodeName
		old := s.nodePod(node)
		if err := s.env().Delete(s.ctx, old, client.Preconditions{UID: &old.UID}); err != nil {
			s.t.Fatalf("delete NODE Pod %s on %s: %v", old.Name, node, err)
		}
		s.t.Logf("deleted NODE Pod %s on %s (the consumer's node)", old.Name, node)
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		defer cancel()
		if err := s.gen.WaitFailing(ctx); err != nil {
			s.t.Fatalf("no operation failed within a minute of the NODE Pod's deletion: the fault did not reach the application (%v)", err)
		}
		var now *corev1.Pod
		waitFor(s.ctx, s.t, storageSettle, func() bool {
			now = s.findNodePod(node)
			return now != nil && now.UID != old.UID && podReady(now)
		}, func() string { return "the DaemonSet brings no Ready NODE Pod back on " + node })
		s.t.Logf("NODE Pod %s Ready on %s", now.Name, node)
		s.restartWriter()
	})
}

// The consumer Pod moved to another node as a drain moves it (the node
// cordoned, the Pod evicted through the Eviction API; only the writer is
// evicted, so the controllers' Pods never move with it): the volume is staged
// on the new node, whose writable mount opens a newer fencing epoch through
// Raft, so the engine refuses the old mount from then on (the CSIDriver has
// attachRequired: false: nothing else fences it). A descriptor held open on
// the old node's mount across the drain (storage_fence_test.go) proves it: its
// write answers EIO and never reaches the volume read through the new node.
// Then the old node keeps neither a session nor a mount of the volume, and
// every acknowledged byte reads back.
func TestStorageConsumerDrainedToAnotherNodeFencesTheOldMount(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses, cluster.PowerHostDisks)
	runVolumeScenario(t, "storage: consumer Pod drained to another node (old mount fenced: its write answers EIO, never lands)", "q-drain", func(s *volumeScenario) {
		from := s.pod.Spec.NodeName
		before, ok := s.mountSession(from)
		if !ok || before.State != mountStateMounted || before.FencingEpoch == 0 || before.Target == "" {
			s.t.Fatalf("the mount owner on %s must record a mounted single-writer session with a fencing epoch and a target before the drain: %+v (found %v)",
				from, before, ok)
		}
		held := s.holdMount(from, before.Target)
		if _, err := env.Kubectl(s.ctx, "cordon", from); err != nil {
			s.t.Fatal(err)
		}
		defer env.Kubectl(s.ctx, "uncordon", from)
		s.replaceWriter(s.evictPod)
		to := s.pod.Spec.NodeName
		if to == from {
			s.t.Fatalf("the writer Pod came back on the cordoned node %s", from)
		}
		after, ok := s.mountSession(to)
		switch {
		case !ok || after.State != mountStateMounted || after.Target == "":
			s.t.Fatalf("no mounted session of %s on %s, the new node: %+v (found %v)", s.volume, to, after, ok)
		case after.FencingEpoch <= before.FencingEpoch:
			s.t.Errorf("the mount on %s opened fencing epoch %d, not above the old mount's %d on %s: the old mount is not fenced",
				to, after.FencingEpoch, before.FencingEpoch, from)
		}
		s.requireFenced(held, to, after)
		// The kubelet unstages the old node's mount after the Pod is gone;
		// the mount owner's unmount ends once the held descriptor closed.
		var left mountSession
		var recorded, mounted bool
		waitFor(s.ctx, s.t, storageSettle, func() bool {
			left, recorded = s.mountSession(from)
			mounted = s.nodeMounted(from, before.Target)
			return !recorded && !mounted
		}, func() string {
			return fmt.Sprintf("the old node %s still holds %s after the move: session recorded %v (%+v), %s mounted %v",
				from, s.volume, recorded, left, before.Target, mounted)
		})
		s.t.Logf("moved from %s (epoch %d) to %s (epoch %d); the old mount refused the write and is gone", from, before.FencingEpoch, to, after.FencingEpoch)
		if _, err := env.Kubectl(s.ctx, "uncordon", from); err != nil {
			s.t.Fatal(err)
		}
	})
}

// Expansion while writing: the claim grows, statfs in the Pod shows it and
// the writers go on.
func TestStorageExpansionWhileWriting(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses)
	runVolumeScenario(t, "storage: volume expansion while writing", "q-grow", func(s *volumeScenario) {
		want := resource.MustParse("128Mi")
		var pvc corev1.PersistentVolumeClaim
		if err := s.env().Get(s.ctx, client.ObjectKey{Namespace: storageTestNamespace, Name: s.name}, &pvc); err != nil {
			s.t.Fatalf("get claim: %v", err)
		}
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = want
		if err := s.env().Update(s.ctx, &pvc); err != nil {
			s.t.Fatalf("expand claim %s to %s: %v", s.name, want.String(), err)
		}
		var fs struct{ total uint64 }
		waitFor(s.ctx, s.t, storageSettle, func() bool {
			st, err := storageload.Statfs(s.ctx, s.target(s.pod))
			fs.total = st.TotalBytes
			return err == nil && st.TotalBytes >= uint64(want.Value())
		}, func() string {
			return "statfs in the writer Pod does not show the expanded size: " + resource.NewQuantity(int64(fs.total), resource.BinarySI).String()
		})
		s.t.Logf("statfs in the Pod: %d bytes", fs.total)
	})
}

// followers are the replicas not reporting themselves coordinator.
func (s *volumeScenario) followers() []storagev1alpha1.VolumeReplica {
	s.t.Helper()
	coord := s.coordinator()
	var out []storagev1alpha1.VolumeReplica
	for _, r := range s.replicas() {
		if r.Name != coord.Name {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		s.t.Fatalf("volume %s has no follower", s.volume)
	}
	return out
}

// killReplicaHosts kill -9s, at once, the replica-host process of the NODE
// Pod on each replica's node (every worker of that node dies with it), and
// waits until the DaemonSet's containers restarted them.
func (s *volumeScenario) killReplicaHosts(rs ...storagev1alpha1.VolumeReplica) {
	s.t.Helper()
	before := map[string]int32{}
	for _, r := range rs {
		before[r.Spec.Node] = restartsOf(s.nodePod(r.Spec.Node), containerReplicaHost)
	}
	for _, r := range rs {
		if err := cluster.KillContainerProcess(s.nodePod(r.Spec.Node).UID, containerReplicaHost); err != nil {
			s.t.Fatalf("kill -9 the replica-host of %s: %v", r.Spec.Node, err)
		}
		s.t.Logf("kill -9 of replica-host on %s (replica %s, role %s)", r.Spec.Node, r.Name, r.Status.Role)
	}
	for node, n := range before {
		s.waitRestarted(node, containerReplicaHost, n)
	}
}

// killNodeContainer kill -9s every process of one container of the NODE Pod
// on node and waits until the kubelet restarted it.
func (s *volumeScenario) killNodeContainer(node, container string) {
	s.t.Helper()
	p := s.nodePod(node)
	var id string
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == container {
			id = c.ContainerID
		}
	}
	before := restartsOf(p, container)
	if err := cluster.KillContainer(id); err != nil {
		s.t.Fatalf("kill -9 the %s container on %s: %v", container, node, err)
	}
	s.t.Logf("kill -9 of the %s container on %s", container, node)
	s.waitRestarted(node, container, before)
}

func (s *volumeScenario) waitRestarted(node, container string, before int32) {
	s.t.Helper()
	waitFor(s.ctx, s.t, storageSettle, func() bool {
		q := s.nodePod(node)
		return restartsOf(q, container) > before && podReady(q)
	}, func() string { return "the " + container + " container on " + node + " did not come back" })
}

// restartWriter deletes the writer Pod and starts a fresh one on the claim
// (unpublish, unstage, stage, publish), which the writers continue on.
func (s *volumeScenario) restartWriter() {
	s.t.Helper()
	s.replaceWriter(s.deletePod)
}

// replaceWriter stops the writers, removes the writer Pod by remove (which
// returns once it is gone), starts a fresh one wherever the scheduler puts
// it and continues the writers there.
func (s *volumeScenario) replaceWriter(remove func(p *corev1.Pod)) {
	s.t.Helper()
	s.stopLoad()
	remove(s.pod)
	s.pod = s.startWriter("")
	s.startLoad(s.pod)
}

// evictPod evicts p through the Eviction API, as a drain does, and waits
// until it is gone.
func (s *volumeScenario) evictPod(p *corev1.Pod) {
	s.t.Helper()
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
	if err := env.Kube.PolicyV1().Evictions(p.Namespace).Evict(s.ctx, ev); err != nil {
		s.t.Fatalf("evict Pod %s: %v", p.Name, err)
	}
	waitFor(s.ctx, s.t, storageSettle, func() bool {
		return apierrors.IsNotFound(s.env().Get(s.ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}))
	}, func() string { return "evicted Pod " + p.Name + " still exists" })
}

// mountStateMounted is the mount owner's state of a serving session
// (internal/mountowner/api: State "Mounted").
const mountStateMounted = "Mounted"

// mountSession is the fields the suites read of the mount owner's session
// record (internal/mountowner/api.Session, one JSON file per volume).
type mountSession struct {
	State        string `json:"state"`
	FencingEpoch uint64 `json:"fencingEpoch"`
	Target       string `json:"target"`
}

// mountSession reads the session record of the scenario's volume that the
// mount owner on node keeps under its state directory
// (/var/lib/cellfleet/mount-owner/sessions/<volume ID>.json in the node,
// .cluster/nodes/<node>/cellfleet/... here); ok is false when there is none.
func (s *volumeScenario) mountSession(node string) (mountSession, bool) {
	s.t.Helper()
	var pv corev1.PersistentVolume
	if err := s.env().Get(s.ctx, client.ObjectKey{Name: s.volume}, &pv); err != nil || pv.Spec.CSI == nil {
		s.t.Fatalf("PersistentVolume %s and its CSI volume handle: %v", s.volume, err)
	}
	path := nodeStatePath(node, "mount-owner", "sessions", pv.Spec.CSI.VolumeHandle+".json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return mountSession{}, false
	}
	if err != nil {
		s.t.Fatalf("read the mount owner's session record: %v", err)
	}
	var ms mountSession
	if err := json.Unmarshal(b, &ms); err != nil {
		s.t.Fatalf("session record %s: %v", path, err)
	}
	return ms, true
}
