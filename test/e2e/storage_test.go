package e2e

// Storage qualification (issue 13), first scenarios: a PVC of the replicated
// StorageClass mounted in a Pod (a real FUSE mount of a 3-replica volume,
// real kubelet, real CSI sidecars), under continuous writes, faults injected
// with kill -9 on this host, every acknowledged write read back through the
// volume from a fresh Pod.
//
// The writer is celldsim (test/celldsim) with no peers
// (CELLD_SIM_PEER_COPIES=0): it acknowledges a write only after appending it
// to its log on /work, the replicated volume, and fsyncing it, so the ledger
// of test/e2e/load (kept here, outside the volume) holds exactly what the
// volume must keep. A dedicated storage workload (checksummed records, small
// files) is not built yet.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/test/e2e/cluster"
	"github.com/cellfleet/cellfleet/test/e2e/load"
)

const (
	storageTestNamespace = "storage-q"
	replicatedClass      = "cellfleet-replicated"
	// storageSettle bounds provisioning (claim to Ready Pod) and each recovery.
	storageSettle = 3 * time.Minute
)

// storageResult is one row of the summary's storage section.
type storageResult struct {
	Scenario     string
	Duration     time.Duration
	Provisioning time.Duration // claim to Ready writer Pod
	Acked        int
	Verified     int
	Deletions    []string
	Passed       bool
}

var storageResults []storageResult

// volumeScenario is one running storage scenario: a fresh claim, its writer
// Pod and the load through the Pod.
type volumeScenario struct {
	t      *testing.T
	ctx    context.Context
	name   string // the claim's name
	start  time.Time
	volume string // the PersistentVolume, also the ReplicatedVolume's name
	pod    *corev1.Pod
	ledger *load.Ledger
	gen    *load.Generator
	res    storageResult
}

func TestStorageProvisioningAndCoordinatorKillKeepEveryWrite(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses)
	runVolumeScenario(t, "storage: provisioning, kill -9 of the coordinator's replica-host", "q-coord", func(s *volumeScenario) {
		s.killReplicaHost(s.coordinator())
	})
}

func TestStorageFollowerHostKillKeepsEveryWrite(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses)
	runVolumeScenario(t, "storage: kill -9 of a follower's replica-host", "q-follower", func(s *volumeScenario) {
		coord := s.coordinator()
		for _, r := range s.replicas() {
			if r.Name != coord.Name {
				s.killReplicaHost(&r)
				return
			}
		}
		s.t.Fatalf("volume %s has no follower", s.volume)
	})
}

// runVolumeScenario provisions a fresh claim with a writer Pod (timed),
// starts the load, runs body, then reads every acknowledged write back from
// a fresh Pod on the same claim and judges the manager's deletions.
func runVolumeScenario(t *testing.T, title, name string, body func(s *volumeScenario)) {
	requireCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := &volumeScenario{t: t, ctx: ctx, name: name, start: time.Now(), ledger: load.NewLedger()}
	s.res.Scenario = title
	t.Cleanup(func() { s.cleanup() })
	t.Cleanup(func() { s.record() })

	ensureNamespace(ctx, t, storageTestNamespace)
	s.createClaim()
	s.pod = s.startWriter(name + "-w1")
	s.res.Provisioning = time.Since(s.start).Round(100 * time.Millisecond)
	t.Logf("claim %s to Ready writer Pod in %v (volume %s, node %s)", name, s.res.Provisioning, s.volume, s.pod.Spec.NodeName)

	s.gen = load.Start(s.target(s.pod), name, s.ledger, load.Options{})
	defer s.gen.Stop()
	s.serving("before the fault")
	body(s)
	s.serving("after the fault")
	s.gen.Stop()

	// Read back from a fresh Pod: the first Pod is deleted (unpublish,
	// unstage), the claim mounted again.
	s.deletePod(s.pod)
	fresh := s.startWriter(name + "-w2")
	verified, lost := load.Verify(ctx, s.target(fresh), s.ledger, 10)
	s.res.Acked, s.res.Verified = s.ledger.Len(), verified
	if len(lost) > 0 {
		var keys []string
		for _, l := range lost[:min(len(lost), 10)] {
			keys = append(keys, fmt.Sprintf("%s (%v)", l.Key, l.Err))
		}
		t.Errorf("%d of %d acknowledged writes are not readable from a fresh Pod: nothing acknowledged may be lost; first: %s",
			len(lost), s.ledger.Len(), strings.Join(keys, ", "))
	}
	t.Logf("ledger: %d acknowledged, %d verified from a fresh Pod, load %+v", s.ledger.Len(), verified, s.gen.Stats())
	s.checkDeletions()
}

func ensureNamespace(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// createClaim creates the RWO claim of the replicated class and waits until
// it is bound (the class binds immediately: CreateVolume returns once a
// coordinator serves with a quorum).
func (s *volumeScenario) createClaim() {
	s.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: storageTestNamespace, Name: s.name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(replicatedClass),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")},
			},
		},
	}
	if err := s.env().Create(s.ctx, pvc); err != nil {
		s.t.Fatalf("create claim %s: %v", s.name, err)
	}
	waitFor(s.ctx, s.t, storageSettle, func() bool {
		if err := s.env().Get(s.ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false
		}
		s.volume = pvc.Spec.VolumeName
		return pvc.Status.Phase == corev1.ClaimBound
	}, func() string { return fmt.Sprintf("claim %s not bound (phase %s)", s.name, pvc.Status.Phase) })
}

// startWriter starts celldsim on the claim and waits until it is Ready.
func (s *volumeScenario) startWriter(name string) *corev1.Pod {
	s.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: storageTestNamespace, Name: name, Labels: map[string]string{"app": s.name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				FSGroup: ptr.To[int64](65532)},
			Containers: []corev1.Container{{
				Name:  "celld",
				Image: runtimeImage(s.t, 1),
				Env: []corev1.EnvVar{
					{Name: "CELLD_WATCH", Value: "/work"},
					// No peer copies: the volume alone must keep what is acknowledged.
					{Name: "CELLD_SIM_PEERS", Value: "127.0.0.1:1"},
					{Name: "CELLD_SIM_PEER_COPIES", Value: "0"},
					{Name: "CELLD_SIM_BOOTSTRAP_MS", Value: "0"},
				},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/.well-known/celld/health", Port: intstr.FromInt32(8080)}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/work"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.name}}}},
		},
	}
	if err := s.env().Create(s.ctx, p); err != nil {
		s.t.Fatalf("create writer Pod %s: %v", name, err)
	}
	waitFor(s.ctx, s.t, storageSettle, func() bool {
		return s.env().Get(s.ctx, client.ObjectKeyFromObject(p), p) == nil && podReady(p) && p.Status.PodIP != ""
	}, func() string { return fmt.Sprintf("writer Pod %s not Ready: %+v", name, p.Status.Conditions) })
	return p
}

func (s *volumeScenario) deletePod(p *corev1.Pod) {
	s.t.Helper()
	if err := s.env().Delete(s.ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatalf("delete Pod %s: %v", p.Name, err)
	}
	waitFor(s.ctx, s.t, storageSettle, func() bool {
		return apierrors.IsNotFound(s.env().Get(s.ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}))
	}, func() string { return "Pod " + p.Name + " still exists" })
}

// target is the writer Pod's application port: Pod IPs are reachable from
// this host (each node's bridge is a host interface).
func (s *volumeScenario) target(p *corev1.Pod) load.Target {
	return load.Target{Base: fmt.Sprintf("http://%s:8080", p.Status.PodIP)}
}

func (s *volumeScenario) serving(when string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Minute)
	defer cancel()
	if err := s.gen.WaitAcknowledged(ctx, 25); err != nil {
		s.t.Fatalf("volume %s does not acknowledge writes %s: %v (load %+v)", s.volume, when, err, s.gen.Stats())
	}
}

func (s *volumeScenario) replicas() []storagev1alpha1.VolumeReplica {
	s.t.Helper()
	var l storagev1alpha1.VolumeReplicaList
	if err := s.env().List(s.ctx, &l, client.InNamespace(storageNamespace)); err != nil {
		s.t.Fatalf("list VolumeReplicas: %v", err)
	}
	var out []storagev1alpha1.VolumeReplica
	for _, r := range l.Items {
		if r.Spec.VolumeName == s.volume {
			out = append(out, r)
		}
	}
	return out
}

// coordinator is the replica reporting itself coordinator.
func (s *volumeScenario) coordinator() *storagev1alpha1.VolumeReplica {
	s.t.Helper()
	var found *storagev1alpha1.VolumeReplica
	waitFor(s.ctx, s.t, storageSettle, func() bool {
		for _, r := range s.replicas() {
			if r.Status.Role == storagev1alpha1.RoleCoordinator {
				found = &r
				return true
			}
		}
		return false
	}, func() string { return "no replica of " + s.volume + " reports itself coordinator" })
	return found
}

// killReplicaHost kill -9s the replica-host process of the NODE Pod on the
// replica's node (every worker of that node dies with it), and waits until
// the DaemonSet's container restarted it.
func (s *volumeScenario) killReplicaHost(r *storagev1alpha1.VolumeReplica) {
	s.t.Helper()
	p := s.nodePod(r.Spec.Node)
	before := restartsOf(p, "replica-host")
	if err := cluster.KillContainerProcess(p.UID, "replica-host"); err != nil {
		s.t.Fatalf("kill -9 the replica-host of %s: %v", r.Spec.Node, err)
	}
	s.t.Logf("kill -9 of replica-host on %s (replica %s, role %s)", r.Spec.Node, r.Name, r.Status.Role)
	waitFor(s.ctx, s.t, storageSettle, func() bool {
		q := s.nodePod(r.Spec.Node)
		return restartsOf(q, "replica-host") > before && podReady(q)
	}, func() string { return "the replica-host on " + r.Spec.Node + " did not come back" })
}

func (s *volumeScenario) nodePod(node string) *corev1.Pod {
	s.t.Helper()
	var pods corev1.PodList
	if err := s.env().List(s.ctx, &pods, client.InNamespace(storageNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": "node"}); err != nil {
		s.t.Fatalf("list NODE Pods: %v", err)
	}
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName == node && pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i]
		}
	}
	s.t.Fatalf("no NODE Pod on %s", node)
	return nil
}

func restartsOf(p *corev1.Pod, container string) int32 {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == container {
			return c.RestartCount
		}
	}
	return 0
}

// checkDeletions: during a scenario without a lost replica the manager
// deletes nothing (its deletions come from the audit log).
func (s *volumeScenario) checkDeletions() {
	s.t.Helper()
	if !env.Has(cluster.PowerAuditLog) {
		s.t.Logf("manager deletions not checked: this cluster does not give %s", cluster.PowerAuditLog)
		return
	}
	all, err := env.Deletions(s.start)
	if err != nil {
		s.t.Fatalf("read the audit log: %v", err)
	}
	for _, d := range all {
		if d.User == operatorUser {
			s.res.Deletions = append(s.res.Deletions, d.Resource+"/"+d.Namespace+"/"+d.Name)
			s.t.Errorf("the manager deleted %s/%s/%s during the scenario, which must keep everything", d.Resource, d.Namespace, d.Name)
		}
	}
}

func (s *volumeScenario) record() {
	s.res.Duration = time.Since(s.start).Round(time.Second)
	s.res.Passed = !s.t.Failed()
	resultsMu.Lock()
	storageResults = append(storageResults, s.res)
	resultsMu.Unlock()
}

// cleanup removes the Pods and the claim and waits until the manager has
// deleted the volume (its claims, Services, the ReplicatedVolume): those
// deletions belong to this scenario, not to the next one's audit window. The
// deletion order itself is not judged yet.
func (s *volumeScenario) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_ = s.env().DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(storageTestNamespace), client.MatchingLabels{"app": s.name})
	_ = s.env().Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: storageTestNamespace, Name: s.name}})
	if s.volume == "" {
		return
	}
	// The PersistentVolume goes last: the csi-provisioner sidecar (the
	// manager's ServiceAccount) deletes it once DeleteVolume returned.
	for ctx.Err() == nil {
		rvErr := s.env().Get(ctx, client.ObjectKey{Name: s.volume}, &storagev1alpha1.ReplicatedVolume{})
		pvErr := s.env().Get(ctx, client.ObjectKey{Name: s.volume}, &corev1.PersistentVolume{})
		if apierrors.IsNotFound(rvErr) && apierrors.IsNotFound(pvErr) {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	s.t.Logf("volume %s (ReplicatedVolume or PersistentVolume) still exists 3 minutes after its claim was deleted", s.volume)
}

func (s *volumeScenario) env() client.Client { return env.Client }

// writeStorageSummary appends the storage section (when a storage scenario
// ran): the caller holds resultsMu.
func writeStorageSummary(b *strings.Builder) {
	if len(storageResults) == 0 {
		return
	}
	b.WriteString("\n## Storage\n\n" +
		"Each storage scenario starts from a fresh claim of `cellfleet-replicated` (3 replicas) mounted in a writer Pod " +
		"(celldsim with no peers: a write is acknowledged once fsynced on the volume), under continuous writes from this " +
		"host; *provisioning* is claim to Ready writer Pod; *verified* counts acknowledged writes read back from a fresh Pod " +
		"on the same claim (every one must be); *manager deletions* come from the audit log (none are allowed). " +
		"Replica digests are not compared yet (VolumeReplica has no digest in its status).\n\n")
	b.WriteString("| scenario | result | duration | provisioning | writes acknowledged | writes verified | manager deletions |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range storageResults {
		status := "pass"
		if !r.Passed {
			status = "FAIL: see the test log"
		}
		dels := "none"
		if len(r.Deletions) > 0 {
			dels = strings.Join(r.Deletions, ", ")
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %d | %s |\n", r.Scenario, status, r.Duration, r.Provisioning, r.Acked, r.Verified, dels)
	}
}
