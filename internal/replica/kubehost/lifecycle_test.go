package kubehost_test

// Three real replica-host processes in Kubernetes mode, one per "node",
// against one real kube-apiserver, with the real volume controller running
// in-process. envtest runs no kubelet, scheduler, local provisioner or
// local CSI plugin, so the test plays exactly those parts (clearly marked
// "plays"): NODE Pods whose replica-host container is ready, a PV bound to
// each backing claim as the local provisioner would, and the local
// plugin's exclusive publication: a real bind mount of a directory on disk
// at <consumer root>/<PV name>, which each host waits for in its own mount
// namespace. Everything else (EndpointSlices, Raft, statuses, release
// acknowledgements, teardown) is the code under test.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
	"github.com/cellfleet/cellfleet/internal/replica/kubehost"
	"github.com/cellfleet/cellfleet/internal/testenv"
)

const hosts = 3

type fixture struct {
	t             *testing.T
	ctx           context.Context
	dir           string
	ns, managerNS string
	nodes         []string
	consumer      []string // each host's consumer mount root
	status        []string // each host's status listener
	procs         []*exec.Cmd
	// replacementDelay is the volume controller's --replica-replacement-delay
	// (zero: its default).
	replacementDelay time.Duration
	mu               sync.Mutex
	mounts           []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the publication the hosts wait for is a real bind mount: needs root (CAP_SYS_ADMIN)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	// The storage namespace is the generated Role's: the hosts run with it.
	fx := &fixture{t: t, ctx: ctx, dir: t.TempDir(), ns: "cellfleet-storage", managerNS: "kh-system"}
	for _, ns := range []string{fx.ns, fx.managerNS} {
		err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) { // an earlier test of the package made it
			t.Fatal(err)
		}
	}
	for _, f := range []string{"role.yaml", "role_binding.yaml"} {
		if err := env.ApplyFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "replica-host", f)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(fx.unmountAll)
	return fx
}

// node creates a Node labelled for local storage and plays the kubelet
// reporting its NODE Pod's replica-host container ready.
func (fx *fixture) node(name string) {
	fx.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{volume.LocalStorageLabel: name}}}
	if err := env.Client.Create(fx.ctx, n); err != nil {
		fx.t.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "node-" + name, Namespace: fx.ns,
			Labels: map[string]string{volume.NodeComponentLabel: volume.NodeComponentValue}},
		Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: volume.ReplicaHostContainer, Image: "replica-host"}}},
	}
	if err := env.Client.Create(fx.ctx, p); err != nil {
		fx.t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: volume.ReplicaHostContainer, Ready: true}}
	if err := env.Client.Status().Update(fx.ctx, p); err != nil {
		fx.t.Fatal(err)
	}
	fx.nodes = append(fx.nodes, name)
	// Gone after the test, so a later test's volumes are never placed on a
	// node whose host no longer runs.
	fx.t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), p)
		_ = env.Client.Delete(context.Background(), n)
	})
}

func freePort(t *testing.T, ip string) int {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startController runs the real volume controller in-process.
func (fx *fixture) startController(ports volume.PortRange) {
	fx.t.Helper()
	// Each test runs its own controller: controller-runtime's process-wide
	// check of controller names would refuse the second.
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		fx.t.Fatal(err)
	}
	r, err := volume.New(mgr.GetClient(), env.Scheme, volume.Options{Namespace: fx.ns, ManagerNamespace: fx.managerNS,
		APIReader: mgr.GetAPIReader(), Ports: ports, ReplicaReplacementDelay: fx.replacementDelay})
	if err != nil {
		fx.t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		fx.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	fx.t.Cleanup(func() { cancel(); <-done })
}

// nodeUser is the NODE DaemonSet's ServiceAccount as the API server names
// it: the hosts impersonate it, so a verb missing from the generated Role
// fails this test rather than a cluster.
const nodeUser = "system:serviceaccount:cellfleet-storage:cellfleet-node"

func (fx *fixture) writeKubeconfig() string {
	fx.t.Helper()
	c := env.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken,
		Impersonate: nodeUser}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	p := filepath.Join(fx.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		fx.t.Fatal(err)
	}
	return p
}

// podIP is the "Pod IP" of host i: each NODE Pod has its own IP, so the
// per-node port allocation may give two replicas the same port. The API
// server refuses loopback addresses in EndpointSlices, so these are
// addresses of TEST-NET-2 (RFC 5737, never routed) added to lo for the test.
func podIP(i int) string { return fmt.Sprintf("198.51.100.%d", i+1) }

// addPodIPs adds the hosts' Pod IPs to the loopback interface and removes
// them when the test ends.
func (fx *fixture) addPodIPs() {
	fx.t.Helper()
	for i := range fx.nodes {
		ip := podIP(i)
		out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", "lo").CombinedOutput()
		if err != nil && !strings.Contains(string(out), "File exists") {
			fx.t.Fatalf("add Pod IP %s to lo (ip addr add): %v: %s", ip, err, out)
		}
		fx.t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", ip+"/32", "dev", "lo").Run() })
	}
}

// startHosts starts one replica-host process per node on its own Pod IP.
func (fx *fixture) startHosts(extraArgs ...string) {
	fx.t.Helper()
	kubeconfig := fx.writeKubeconfig()
	fx.addPodIPs()
	for i, node := range fx.nodes {
		ip := podIP(i)
		root := filepath.Join(fx.dir, node, "consumer")
		state := filepath.Join(fx.dir, node, "state")
		for _, d := range []string{root, state} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				fx.t.Fatal(err)
			}
		}
		status := net.JoinHostPort(ip, fmt.Sprint(freePort(fx.t, ip)))
		fx.consumer, fx.status = append(fx.consumer, root), append(fx.status, status)
		logf, err := os.Create(filepath.Join(fx.dir, node+".log"))
		if err != nil {
			fx.t.Fatal(err)
		}
		cmd := exec.Command(hostBinary, "-node", node, "-namespace", fx.ns, "-kubeconfig", kubeconfig, "-pod-ip", ip,
			"-status-listen", status, "-state-dir", state, "-consumer-mount-root", root, "-log-level", "info",
			"-status-interval", "200ms", "-journal-segment-bytes", "4194304",
			"-heartbeat-timeout", "300ms", "-election-timeout", "300ms", "-leader-lease-timeout", "150ms", "-commit-timeout", "10ms")
		cmd.Args = append(cmd.Args, extraArgs...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			fx.t.Fatal(err)
		}
		logf.Close()
		fx.procs = append(fx.procs, cmd)
		logPath := logf.Name()
		fx.t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			if fx.t.Failed() {
				b, _ := os.ReadFile(logPath)
				fx.t.Logf("log of the host on %s:\n%s", node, tail(string(b), 40))
			}
		})
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// playProvisionerAndPublication plays, for each backing claim of the
// volume, the local provisioner (a PV on the selected node, bound to the
// claim, as the PV controller binds it) and the local plugin's exclusive
// publication (a bind mount of the PV's directory at <consumer root>/<PV>).
// It returns once every claim is bound and published.
func (fx *fixture) playProvisionerAndPublication(volumeName string, want int) {
	fx.t.Helper()
	eventually(fx.t, time.Minute, "every backing claim bound and published", func() error {
		claims := &corev1.PersistentVolumeClaimList{}
		if err := env.Client.List(fx.ctx, claims, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: volumeName}); err != nil {
			return err
		}
		if len(claims.Items) != want {
			return fmt.Errorf("%d of %d backing claims exist", len(claims.Items), want)
		}
		for i := range claims.Items {
			if err := fx.bindAndPublish(&claims.Items[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

func (fx *fixture) bindAndPublish(c *corev1.PersistentVolumeClaim) error {
	if c.Spec.VolumeName != "" {
		return nil
	}
	node := c.Annotations[storagev1alpha1.AnnotationSelectedNode]
	idx := -1
	for i, n := range fx.nodes {
		if n == node {
			idx = i
		}
	}
	if idx < 0 {
		return fmt.Errorf("claim %s selects unknown node %q", c.Name, node)
	}
	pvName := "pv-" + c.Name
	backing := filepath.Join(fx.dir, node, "pv", pvName)
	if err := os.MkdirAll(backing, 0o700); err != nil {
		return err
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   c.Spec.AccessModes,
			StorageClassName:              *c.Spec.StorageClassName,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "local.storage.eric.dev", VolumeHandle: "lv-" + c.Name}},
		},
	}
	if err := env.Client.Create(fx.ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	target := filepath.Join(fx.consumer[idx], pvName)
	if err := os.MkdirAll(target, 0o700); err != nil {
		return err
	}
	// Plays the local plugin's exclusive publication: a real bind mount.
	if err := syscall.Mount(backing, target, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", backing, target, err)
	}
	fx.mu.Lock()
	fx.mounts = append(fx.mounts, target)
	fx.mu.Unlock()
	c.Spec.VolumeName = pvName
	if err := env.Client.Update(fx.ctx, c); err != nil {
		return err
	}
	c.Status.Phase = corev1.ClaimBound
	c.Status.AccessModes = c.Spec.AccessModes
	c.Status.Capacity = pv.Spec.Capacity
	return env.Client.Status().Update(fx.ctx, c)
}

func (fx *fixture) unmountAll() {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	for _, m := range fx.mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			fx.t.Logf("unmount %s: %v", m, err)
		}
	}
	fx.mounts = nil
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, timeout, err)
}

func (fx *fixture) replicas(volumeName string) []storagev1alpha1.VolumeReplica {
	fx.t.Helper()
	l := &storagev1alpha1.VolumeReplicaList{}
	if err := env.Client.List(fx.ctx, l, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: volumeName}); err != nil {
		fx.t.Fatal(err)
	}
	return l.Items
}

func (fx *fixture) volume(name string, replicas int32) *storagev1alpha1.ReplicatedVolume {
	fx.t.Helper()
	rv := &storagev1alpha1.ReplicatedVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1alpha1.ReplicatedVolumeSpec{
			AccessMode: storagev1alpha1.AccessReadWriteOnce, Replicas: replicas,
			Capacity: resource.MustParse("64Mi"), BackingStorageClassName: "local-backing",
			Source: storagev1alpha1.ClaimReference{Namespace: "app", Name: name},
		},
	}
	if err := env.Client.Create(fx.ctx, rv); err != nil {
		fx.t.Fatal(err)
	}
	return rv
}

// startPorts starts the controller with a replica port range beginning at
// a port free now, so one another process holds is unlikely.
func (fx *fixture) startPorts() {
	fx.t.Helper()
	base := int32(freePort(fx.t, "127.0.0.1"))
	if base+10 > 65535 {
		base = 40000
	}
	fx.startController(volume.PortRange{Base: base, Count: 10})
}

func TestThreeHostsRunAVolumeAndReleaseItOnDeletion(t *testing.T) {
	fx := newFixture(t)
	for i := range hosts {
		fx.node(fmt.Sprintf("kh-node-%c", 'a'+i))
	}
	fx.startPorts()
	fx.startHosts()

	rv := fx.volume("khvol", hosts)

	// EndpointSlices come before any publication: Raft needs them first.
	eventually(t, time.Minute, "one EndpointSlice per replica, on its Service, before the claims are bound", func() error {
		l := &discoveryv1.EndpointSliceList{}
		if err := env.Client.List(fx.ctx, l, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
			return err
		}
		if len(l.Items) != hosts {
			return fmt.Errorf("%d EndpointSlices, want %d", len(l.Items), hosts)
		}
		for _, s := range l.Items {
			if s.Labels[discoveryv1.LabelServiceName] != s.Name || s.Labels[discoveryv1.LabelManagedBy] != kubehost.ManagedBy {
				return fmt.Errorf("EndpointSlice %s labels %v", s.Name, s.Labels)
			}
			if len(s.Endpoints) != 1 || len(s.Ports) != 1 || !strings.HasPrefix(s.Endpoints[0].Addresses[0], "198.51.100.") {
				return fmt.Errorf("EndpointSlice %s: %+v %+v", s.Name, s.Endpoints, s.Ports)
			}
		}
		return nil
	})
	for _, vr := range fx.replicas(rv.Name) {
		c := meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaPublished.String())
		if c != nil && c.Status == metav1.ConditionTrue {
			t.Fatalf("replica %s reports Published before its claim is bound: %+v", vr.Name, c)
		}
	}

	fx.playProvisionerAndPublication(rv.Name, hosts)

	eventually(t, 2*time.Minute, "one Coordinator and two Followers, all Ready", func() error {
		roles := map[storagev1alpha1.ReplicaRole]int{}
		for _, vr := range fx.replicas(rv.Name) {
			roles[vr.Status.Role]++
			c := meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaReady.String())
			if c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("replica %s not Ready: %+v", vr.Name, c)
			}
			if vr.Status.AppliedIndex < 1 {
				return fmt.Errorf("replica %s reports applied index %d", vr.Name, vr.Status.AppliedIndex)
			}
		}
		if roles[storagev1alpha1.RoleCoordinator] != 1 || roles[storagev1alpha1.RoleFollower] != hosts-1 {
			return fmt.Errorf("roles %v", roles)
		}
		return nil
	})
	eventually(t, time.Minute, "the volume Ready and Healthy", func() error {
		cur := &storagev1alpha1.ReplicatedVolume{}
		if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(rv), cur); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, storagev1alpha1.VolumeReady.String())
		if c == nil || c.Status != metav1.ConditionTrue || cur.Status.Robustness != storagev1alpha1.RobustnessHealthy {
			return fmt.Errorf("robustness %q, Ready %+v", cur.Status.Robustness, c)
		}
		return nil
	})
	for _, vr := range fx.replicas(rv.Name) {
		for _, ct := range []storagev1alpha1.ConditionType{storagev1alpha1.ReplicaPublished, storagev1alpha1.ReplicaAdmitted} {
			if c := meta.FindStatusCondition(vr.Status.Conditions, ct.String()); c == nil || c.Status != metav1.ConditionTrue {
				t.Errorf("replica %s: %s is %+v, want True", vr.Name, ct, c)
			}
		}
		if c := meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaStateLost.String()); c == nil || c.Status != metav1.ConditionFalse {
			t.Errorf("replica %s: ReplicaStateLost is %+v, want False", vr.Name, c)
		}
		claim := &corev1.PersistentVolumeClaim{}
		if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Spec.BackingClaimName}, claim); err != nil {
			t.Fatal(err)
		}
		if !containsString(claim.Finalizers, storagev1alpha1.FinalizerBackingUse) {
			t.Errorf("claim %s in use lacks the %s finalizer: %v", claim.Name, storagev1alpha1.FinalizerBackingUse, claim.Finalizers)
		}
	}

	// Deletion: workers close, acknowledgements are written, then the
	// controller removes everything.
	claimUIDs := map[string]string{}
	for _, vr := range fx.replicas(rv.Name) {
		claim := &corev1.PersistentVolumeClaim{}
		if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Spec.BackingClaimName}, claim); err != nil {
			t.Fatal(err)
		}
		claimUIDs[vr.Name] = string(claim.UID)
	}
	acks := fx.watchAcks(rv.Name)
	if err := env.Client.Delete(fx.ctx, rv); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the volume and its replicas, Services, EndpointSlices and Secrets removed", func() error {
		var left []string
		if len(fx.replicas(rv.Name)) > 0 {
			left = append(left, "VolumeReplicas")
		}
		for _, l := range []client.ObjectList{&corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}, &corev1.SecretList{}} {
			if err := env.Client.List(fx.ctx, l, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
				return err
			}
			if meta.LenList(l) > 0 {
				left = append(left, fmt.Sprintf("%T", l))
			}
		}
		// envtest runs no PV protection controller: a deleted claim may keep
		// kubernetes.io/pvc-protection; being deleted is what counts.
		claims := &corev1.PersistentVolumeClaimList{}
		if err := env.Client.List(fx.ctx, claims, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
			return err
		}
		for _, c := range claims.Items {
			if c.DeletionTimestamp == nil || containsString(c.Finalizers, storagev1alpha1.FinalizerBackingUse) {
				left = append(left, "claim "+c.Name)
			}
		}
		err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(rv), &storagev1alpha1.ReplicatedVolume{})
		if err == nil {
			left = append(left, "the ReplicatedVolume")
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
	got := acks()
	for name, uid := range claimUIDs {
		if got[name] != uid {
			t.Errorf("replica %s: release acknowledgement %q, want its claim's UID %q (all: %v)", name, got[name], uid, got)
		}
	}
	for i, addr := range fx.status {
		if n := workersOn(t, addr); n != 0 {
			t.Errorf("host %d still runs %d workers after the volume's deletion", i, n)
		}
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// A host past its worker bound hosts nothing more and says so in the
// replica's Admitted condition; once a worker leaves, the waiting replica
// is admitted on a later pass.
func TestAHostPastItsWorkerBoundReportsAdmittedFalse(t *testing.T) {
	fx := newFixture(t)
	fx.node("kh-bound-a")
	fx.startPorts()
	fx.startHosts("-max-workers", "1")
	first := fx.volume("khfirst", 1)
	fx.playProvisionerAndPublication(first.Name, 1)
	ready := func(name string) func() error {
		return func() error {
			vrs := fx.replicas(name)
			if len(vrs) != 1 {
				return fmt.Errorf("%d replicas of %s", len(vrs), name)
			}
			if c := meta.FindStatusCondition(vrs[0].Status.Conditions, storagev1alpha1.ReplicaReady.String()); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("replica %s not Ready: %+v", vrs[0].Name, c)
			}
			return nil
		}
	}
	eventually(t, time.Minute, "the first volume's replica Ready", ready(first.Name))
	second := fx.volume("khsecond", 1)
	fx.playProvisionerAndPublication(second.Name, 1)
	eventually(t, time.Minute, "the second volume's replica held back with Admitted=False WorkerLimitReached", func() error {
		vrs := fx.replicas(second.Name)
		if len(vrs) != 1 {
			return fmt.Errorf("%d replicas of %s", len(vrs), second.Name)
		}
		vr := vrs[0]
		c := meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaAdmitted.String())
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "WorkerLimitReached" {
			return fmt.Errorf("replica %s: Admitted %+v", vr.Name, c)
		}
		if vr.Status.Role != storagev1alpha1.RoleStopped {
			return fmt.Errorf("replica %s held back reports role %q", vr.Name, vr.Status.Role)
		}
		return nil
	})
	if n := workersOn(t, fx.status[0]); n != 1 {
		t.Fatalf("the host runs %d workers, its bound is 1", n)
	}
	if err := env.Client.Delete(fx.ctx, first); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the second volume's replica admitted and Ready once the first left", ready(second.Name))
}
