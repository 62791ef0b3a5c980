package e2e

// Storage qualification (docs/local-cluster.md, "Storage bring-up"): a PVC of
// the replicated StorageClass mounted in a Pod (a real FUSE mount of a
// 3-replica volume, real kubelet, real CSI sidecars), under continuous
// writes, faults injected on this host, every acknowledged operation read
// back through the volume from a fresh Pod, and the replicas' state digests
// compared once the writers stopped.
//
// The writer is storagesim (test/storagesim): it appends checksummed records
// to a log (fsync after each) and creates small checksummed files (fsync of
// file and directory), acknowledging each only once durable; the ledger of
// package storageload, kept here outside the volume, holds exactly what the
// volume must keep, and storagesim's verify sorts a read-back into verified,
// missing and wrong.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/test/e2e/cluster"
	"github.com/cellfleet/cellfleet/test/e2e/storageload"
	storageapi "github.com/cellfleet/cellfleet/test/storagesim/api"
)

const (
	storageTestNamespace = "storage-q"
	replicatedClass      = "cellfleet-replicated"
	// storageSettle bounds provisioning (claim to Ready Pod) and each recovery.
	storageSettle = 3 * time.Minute
	// storageWindow is how long the writers run before and after a fault.
	storageWindow = 10 * time.Second
	// storagePause is each writer's pause between operations.
	storagePause = 10 * time.Millisecond
)

// storageResult is one row of the summary's storage section.
type storageResult struct {
	Scenario     string
	Duration     time.Duration
	Provisioning time.Duration // claim to Ready writer Pod
	Replacement  time.Duration // the fault to the lost replica replaced and the volume Healthy (0: none)
	Acked        int           // operations acknowledged (records and files)
	Verified     int           // of them read back intact from a fresh Pod
	Failed       int64         // operations the application saw fail
	Replicas     string        // digests compared: "3 equal at index N"
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
	ledger *storageload.Ledger
	gen    *storageload.Generator
	res    storageResult
	// pods counts writer Pods, naming the next one.
	pods int
	// allowed are manager deletions the scenario permits ("resource/name",
	// "resource/*"); expected must have happened.
	allowed, expected []string
	// verifyOnPod, when set, verifies from that Pod instead of a fresh one
	// (the scenario already moved or restarted the writer).
	verifyOnPod *corev1.Pod
	// skipEnd: the scenario verified and judged on its own (deletion).
	skipEnd bool
	// provisioningFault, when set, runs once the claim exists and before it
	// is bound (the manager killed mid-provision).
	provisioningFault func(claim *corev1.PersistentVolumeClaim)
}

// runVolumeScenario provisions a fresh claim with a writer Pod (timed),
// starts the load, runs body, stops the writers, compares the replicas'
// digests, then reads every acknowledged operation back from a fresh Pod on
// the same claim and judges the manager's deletions.
func runVolumeScenario(t *testing.T, title, name string, body func(s *volumeScenario)) {
	runVolumeScenarioProvisionedUnder(t, title, name, nil, body)
}

// runVolumeScenarioProvisionedUnder is runVolumeScenario with fault injected
// while the claim is provisioned (nil: none).
func runVolumeScenarioProvisionedUnder(t *testing.T, title, name string, fault func(s *volumeScenario, claim *corev1.PersistentVolumeClaim),
	body func(s *volumeScenario)) {
	requireCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := &volumeScenario{t: t, ctx: ctx, name: name, start: time.Now(), ledger: &storageload.Ledger{}}
	if fault != nil {
		s.provisioningFault = func(claim *corev1.PersistentVolumeClaim) { fault(s, claim) }
	}
	s.res.Scenario = title
	t.Cleanup(func() { s.cleanup() })
	t.Cleanup(func() { s.record() })

	ensureNamespace(ctx, t, storageTestNamespace)
	s.createClaim()
	s.pod = s.startWriter("")
	s.res.Provisioning = time.Since(s.start).Round(100 * time.Millisecond)
	t.Logf("claim %s to Ready writer Pod in %v (volume %s, node %s)", name, s.res.Provisioning, s.volume, s.pod.Spec.NodeName)

	s.startLoad(s.pod)
	defer func() { s.gen.Stop() }()
	s.serving("before the fault")
	body(s)
	if s.skipEnd {
		s.checkDeletions()
		return
	}
	s.serving("after the fault")
	s.stopLoad()
	s.compareDigests()
	p := s.verifyOnPod
	if p == nil {
		// Read back from a fresh Pod: the writer is deleted (unpublish,
		// unstage), the claim mounted again.
		s.deletePod(s.pod)
		p = s.startWriter("")
	}
	s.verify(p)
	s.checkDeletions()
}

// startLoad starts the writers on the fixture of Pod p; the ledger carries on.
func (s *volumeScenario) startLoad(p *corev1.Pod) {
	s.gen = storageload.Start(s.target(p), s.ledger, storagePause)
}

// stopLoad stops the writers and adds what they saw fail to the result.
func (s *volumeScenario) stopLoad() {
	s.gen.Stop()
	st := s.gen.Stats()
	s.res.Failed += st.Failed
	s.t.Logf("writers stopped: %+v", st)
}

// verify asks the fixture in p to read every acknowledged operation back.
func (s *volumeScenario) verify(p *corev1.Pod) {
	s.t.Helper()
	rep, err := storageload.Verify(s.ctx, s.target(p), s.ledger)
	if err != nil {
		s.t.Fatalf("verify through %s: %v", p.Name, err)
	}
	s.res.Acked, s.res.Verified = s.ledger.Len(), rep.Verified
	if len(rep.Wrong) > 0 || rep.CorruptRecords > 0 {
		s.t.Errorf("WRONG DATA: %d acknowledged operations read back with other data, %d corrupt records in the log; first: %+v",
			len(rep.Wrong), rep.CorruptRecords, rep.Wrong[:min(len(rep.Wrong), 5)])
	}
	if len(rep.Missing) > 0 {
		s.t.Errorf("%d of %d acknowledged operations are missing from a fresh Pod: nothing acknowledged may be lost; first: %+v",
			len(rep.Missing), s.ledger.Len(), rep.Missing[:min(len(rep.Missing), 5)])
	}
	s.t.Logf("ledger: %d acknowledged, %d verified through %s", s.ledger.Len(), rep.Verified, p.Name)
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
	if s.provisioningFault != nil {
		s.provisioningFault(pvc.DeepCopy())
	}
	waitFor(s.ctx, s.t, storageSettle, func() bool {
		if err := s.env().Get(s.ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false
		}
		s.volume = pvc.Spec.VolumeName
		return pvc.Status.Phase == corev1.ClaimBound
	}, func() string { return fmt.Sprintf("claim %s not bound (phase %s)", s.name, pvc.Status.Phase) })
}

// startWriter starts storagesim on the claim (on node, when not empty) and
// waits until it is Ready.
func (s *volumeScenario) startWriter(node string) *corev1.Pod {
	s.t.Helper()
	s.pods++
	name := fmt.Sprintf("%s-w%d", s.name, s.pods)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: storageTestNamespace, Name: name, Labels: map[string]string{"app": s.name}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				FSGroup: ptr.To[int64](65532)},
			Containers: []corev1.Container{{
				Name:  "storagesim",
				Image: storagesimImage(s.t),
				Env:   []corev1.EnvVar{{Name: "STORAGESIM_DIR", Value: "/work"}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: storageapi.PathHealth, Port: intstr.FromInt32(8080)}}},
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

// storagesimImage is storagesim's image pinned by digest (make images).
func storagesimImage(t *testing.T) string {
	t.Helper()
	path := filepath.Join(env.Root, "bin", "images", "storagesim.digest")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("storagesim image: %v (run make images)", err)
	}
	ref, digest, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok {
		t.Fatalf("%s: want \"REF sha256:DIGEST\", got %q", path, b)
	}
	repo, _, _ := strings.Cut(ref, ":")
	return repo + "@" + digest
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

// target is the writer Pod's fixture: Pod IPs are reachable from this host
// (each node's bridge is a host interface).
func (s *volumeScenario) target(p *corev1.Pod) string {
	return fmt.Sprintf("http://%s:8080", p.Status.PodIP)
}

// serving waits until the writers acknowledge further operations, after
// letting them run for the scenario's window.
func (s *volumeScenario) serving(when string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Minute)
	defer cancel()
	if err := s.gen.WaitAcknowledged(ctx, 25); err != nil {
		s.t.Fatalf("volume %s does not acknowledge writes %s: %v (load %+v)", s.volume, when, err, s.gen.Stats())
	}
	select {
	case <-s.ctx.Done():
	case <-time.After(storageWindow):
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

func (s *volumeScenario) nodePod(node string) *corev1.Pod {
	s.t.Helper()
	p := s.findNodePod(node)
	if p == nil {
		s.t.Fatalf("no NODE Pod on %s", node)
	}
	return p
}

// findNodePod is the NODE Pod on node not being deleted, or nil.
func (s *volumeScenario) findNodePod(node string) *corev1.Pod {
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

// checkDeletions fails on any deletion by the storage controller's
// ServiceAccount during the scenario that it does not allow (from the audit
// log), and on any it expects that did not happen; and on any deletion by
// the fleet manager's, which never touches the storage half.
func (s *volumeScenario) checkDeletions() {
	s.t.Helper()
	if !env.Has(cluster.PowerAuditLog) {
		s.t.Logf("manager deletions not checked: this cluster does not give %s", cluster.PowerAuditLog)
		return
	}
	got, err := s.managerDeletions()
	if err != nil {
		s.t.Fatal(err)
	}
	s.res.Deletions = got
	for _, d := range got {
		if !slices.Contains(s.allowed, d) && !allowedKind(s.allowed, d) {
			s.t.Errorf("the manager deleted %s during the scenario, which must keep it", d)
		}
	}
	for _, want := range s.expected {
		res, name, _ := strings.Cut(want, "/")
		if !slices.ContainsFunc(got, func(d string) bool { return d == want || name == "*" && strings.HasPrefix(d, res+"/") }) {
			s.t.Errorf("the manager did not delete %s (its deletions: %v)", want, got)
		}
	}
}

// managerDeletions are the storage controller's deletions since the scenario
// started, as "resource/name", and any of the fleet manager's, as
// "fleet-operator:resource/namespace/name" (no scenario allows one).
func (s *volumeScenario) managerDeletions() ([]string, error) {
	all, err := env.Deletions(s.start)
	if err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	var out []string
	for _, d := range all {
		switch d.User {
		case storageControllerUser:
			out = append(out, d.Resource+"/"+d.Name)
		case operatorUser:
			out = append(out, "fleet-operator:"+d.Resource+"/"+d.Namespace+"/"+d.Name)
		}
	}
	return out, nil
}

// compareDigests asks every replica of the volume for a state digest now
// that the writers stopped (the digest-requested annotation, one value per
// scenario) and requires them all at one index with one value.
func (s *volumeScenario) compareDigests() {
	s.t.Helper()
	request := fmt.Sprintf("%s-%d", s.name, time.Now().Unix())
	for _, r := range s.replicas() {
		patch := client.RawPatch(types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, storagev1alpha1.AnnotationDigestRequested, request))
		if err := s.env().Patch(s.ctx, &r, patch); err != nil {
			s.t.Fatalf("request a digest of %s: %v", r.Name, err)
		}
	}
	var reps []storagev1alpha1.VolumeReplica
	waitFor(s.ctx, s.t, 2*time.Minute, func() bool {
		reps = s.replicas()
		for _, r := range reps {
			if r.Status.Digest == nil || r.Status.Digest.Request != request {
				return false
			}
		}
		return len(reps) > 0
	}, func() string {
		return fmt.Sprintf("not every replica of %s answered digest request %s: %s", s.volume, request, digestsOf(reps))
	})
	first := reps[0].Status.Digest
	for _, r := range reps[1:] {
		if d := r.Status.Digest; d.Index != first.Index || d.Value != first.Value {
			s.res.Replicas = "DIVERGED: " + digestsOf(reps)
			s.t.Errorf("replicas of %s disagree after the writers stopped: %s", s.volume, digestsOf(reps))
			return
		}
	}
	s.res.Replicas = fmt.Sprintf("%d equal at index %d", len(reps), first.Index)
	s.t.Logf("digests: %s", digestsOf(reps))
}

func digestsOf(reps []storagev1alpha1.VolumeReplica) string {
	var parts []string
	for _, r := range reps {
		d := r.Status.Digest
		if d == nil {
			parts = append(parts, r.Name+"=none")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%d:%.12s(%s)", r.Name, d.Index, d.Value, d.Request))
	}
	return strings.Join(parts, " ")
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
	// storage controller's ServiceAccount) deletes it once DeleteVolume
	// returned.
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
		"running storagesim (test/storagesim), under continuous writes from this host: checksummed records appended to a log " +
		"with fsync after each and small checksummed files (fsync of file and directory), each acknowledged only once durable, " +
		"the ledger kept on this host. *provisioning* is claim to Ready writer Pod; *failed* counts operations the application " +
		"saw fail (errors, never acknowledged); *verified* counts acknowledged operations read back intact from a fresh Pod " +
		"(every one must be; storagesim tells wrong data from missing); *replicas compared* are the state digests every replica " +
		"published at one applied index after the writers stopped (VolumeReplica status.digest); *manager deletions* come from " +
		"the audit log (only those the scenario names are allowed); *replacement* is the fault to the lost replica replaced " +
		"and the volume Healthy again.\n\n")
	b.WriteString("| scenario | result | duration | provisioning | replacement | operations acknowledged | verified | failed (seen by the app) | replicas compared | manager deletions |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range storageResults {
		status := "pass"
		if !r.Passed {
			status = "FAIL: see the test log"
		}
		dels := "none"
		if len(r.Deletions) > 0 {
			dels = strings.Join(r.Deletions, ", ")
		}
		reps := r.Replicas
		if reps == "" {
			reps = "not compared"
		}
		replacement := "-"
		if r.Replacement > 0 {
			replacement = r.Replacement.String()
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d | %d | %d | %s | %s |\n", r.Scenario, status, r.Duration, r.Provisioning, replacement,
			r.Acked, r.Verified, r.Failed, reps, dels)
	}
}

// allow permits (and expect also requires) manager deletions, as
// "resource/name" or "resource/*".
func (s *volumeScenario) allow(resourceNames ...string) {
	s.allowed = append(s.allowed, resourceNames...)
}
func (s *volumeScenario) expect(resourceNames ...string) {
	s.allow(resourceNames...)
	s.expected = append(s.expected, resourceNames...)
}
