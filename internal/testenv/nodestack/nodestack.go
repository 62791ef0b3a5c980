// Package nodestack runs real NODE stacks against one envtest API server,
// for the tests of the replica host and of the whole storage stack: per
// "node" a Node object, the real local CSI driver (internal/csi/local)
// served on a unix socket in the test process with exclusive publication
// beneath its consumer mount root, and a real replica-host process in
// Kubernetes mode that asks that driver for each backing volume's
// publication (-local-csi-endpoint). The real volume controller runs
// in-process.
//
// envtest runs no kubelet, scheduler, csi-provisioner or PV controller, so
// the stack plays exactly those parts, and says so where it does: the NODE
// Pod whose replica-host container is reported ready (kubelet), each
// backing claim's provisioning: CreateVolume on the selected node's local
// driver, a PV of local.storage.eric.dev with that node's affinity, bound
// to the claim (csi-provisioner in distributed mode and the PV controller),
// and the lifting of kubernetes.io/pvc-protection from deleted claims
// (kube-controller-manager's PVC protection controller).
//
// This package is imported by tests only; production code must never import it.
package nodestack

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/testenv"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

// StorageNamespace is the generated replica-host Role's namespace: the hosts
// run with it.
const StorageNamespace = "cellfleet-storage"

// NodeServiceAccount is the NODE DaemonSet's ServiceAccount: the hosts run
// with its tokens, so a verb missing from the generated roles fails a test
// rather than a cluster.
const NodeServiceAccount = "cellfleet-node"

// NodePodName is the NODE Pod the stack creates on node.
func NodePodName(node string) string { return "node-" + node }

// Main is a TestMain body for packages that run replica hosts: it builds
// the real replica-host binary (*hostBinary, proccluster.Binary), then runs
// the tests against one API server as testenv.Main does.
func Main(m *testing.M, env **testenv.Env, hostBinary *string) {
	os.Exit(run(m, env, hostBinary))
}

func run(m *testing.M, env **testenv.Env, hostBinary *string) int {
	defer proccluster.RemoveBinaries()
	var err error
	if *hostBinary, err = proccluster.Binary(proccluster.ReplicaHostPackage); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return testenv.Run(m, env)
}

// Stack is the nodes of one test.
type Stack struct {
	T         *testing.T
	Ctx       context.Context
	Env       *testenv.Env
	Dir       string
	NS        string // the storage namespace
	ManagerNS string // the manager's namespace (the volumes' CA Secrets)
	Nodes     []*Node
	// ReplacementDelay is the volume controller's
	// --replica-replacement-delay (zero: its default); set it before
	// StartController.
	ReplacementDelay time.Duration
	// OrphanGrace is the controller's --orphan-volume-grace (zero: an
	// hour; the stacks' volumes have no source claim, as no provisioner of
	// the replicated driver is played, and must not be collected mid-test).
	OrphanGrace time.Duration
	// RebuildTimeout is the controller's --replica-rebuild-timeout (zero:
	// its default); tests set it below the flag's minimum.
	RebuildTimeout time.Duration
	// CertificateValidity is the controller's
	// --replica-certificate-validity (zero: its default); tests set it
	// to seconds, below the flag's minimum.
	CertificateValidity time.Duration
	// APIGated routes the hosts' API connections through a gate the test
	// can cut (CutAPI, OpenAPI: apigate.go); set it before StartHosts.
	APIGated   bool
	gate       *apiGate
	hostBinary string
	hostArgs   []string // StartHosts' extra flags, for RestartHost
	// controller is the running volume controller, deletes what every
	// controller of the stack deleted (controller.go).
	controller controllerRun
	deletes    deleteLog
}

// New prepares a stack: namespaces, the replica host's generated roles, a
// directory whose mounts are all detached when the test ends. It skips,
// saying why, without root (the publications are real bind mounts).
func New(t *testing.T, env *testenv.Env, hostBinary, managerNS string) *Stack {
	t.Helper()
	csitest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	// A short base, not t.TempDir(): unix socket paths beneath it (the
	// hosts' admin sockets, the drivers') must stay under the kernel's
	// 107 bytes whatever the test's name.
	dir, err := os.MkdirTemp("", "nodestack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &Stack{T: t, Ctx: ctx, Env: env, Dir: dir, NS: StorageNamespace, ManagerNS: managerNS, hostBinary: hostBinary}
	// Registered first, so it runs last: after the hosts and drivers stopped.
	csitest.CleanupMounts(t, s.Dir)
	for _, ns := range []string{s.NS, s.ManagerNS} {
		if err := ensureNamespace(ctx, env.Client, ns); err != nil {
			t.Fatal(err)
		}
	}
	manifests := []string{
		filepath.Join("config", "rbac", "replica-host", "role.yaml"),
		filepath.Join("config", "rbac", "replica-host", "role_binding.yaml"),
		filepath.Join("config", "rbac", "replica-host", "cluster_role_binding.yaml"),
		// The NODE ServiceAccount, the policy admitting its token
		// exchange only for its own node's ServiceAccount (exchange.go)
		// and the one admitting its writes only of its own node's objects.
		filepath.Join("config", "node", "serviceaccount.yaml"),
		filepath.Join("config", "node", "token-exchange-policy.yaml"),
		filepath.Join("config", "node", "node-write-policy.yaml"),
	}
	for _, f := range manifests {
		if err := env.ApplyFile(ctx, filepath.Join(testenv.RepoRoot(), f)); err != nil {
			t.Fatal(err)
		}
	}
	s.playPVCProtection()
	return s
}

// PodIP is the "Pod IP" of host i: each NODE Pod has its own IP, so the
// per-node port allocation may give two replicas the same port. The API
// server refuses loopback addresses in EndpointSlices, so these are
// addresses of TEST-NET-2 (RFC 5737, never routed) added to lo for the test.
// Packages run in parallel (go test ./...), each in its own process, so the
// block of three a process uses is chosen by its pid: two packages' hosts
// rarely share an address, and one package's cleanup never removes an
// address it did not add.
func PodIP(i int) string { return fmt.Sprintf("198.51.100.%d", podIPBase+i+1) }

var podIPBase = (os.Getpid() % 80) * 3

// StartController runs the real volume controller in-process.
func (s *Stack) StartController(ports volume.PortRange) {
	s.T.Helper()
	// Each test runs its own controller: controller-runtime's process-wide
	// check of controller names would refuse the second.
	mgr, err := ctrl.NewManager(s.Env.Config, ctrl.Options{Scheme: s.Env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		s.T.Fatal(err)
	}
	grace := s.OrphanGrace
	if grace == 0 {
		grace = time.Hour
	}
	r, err := volume.New(s.audit(mgr.GetClient()), s.Env.Scheme, volume.Options{Namespace: s.NS, ManagerNamespace: s.ManagerNS,
		APIReader: mgr.GetAPIReader(), Ports: ports, ReplicaReplacementDelay: s.ReplacementDelay, OrphanGracePeriod: grace,
		ReplicaRebuildTimeout: s.RebuildTimeout, CertificateValidity: s.CertificateValidity})
	if err != nil {
		s.T.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		s.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	s.controller = controllerRun{ports: ports, stop: func() { cancel(); <-done }}
	s.T.Cleanup(s.StopController)
}

// StartControllerOnFreePorts starts the controller with a replica port
// range of ports free now (proccluster.FreePorts), so one another process
// holds is unlikely.
func (s *Stack) StartControllerOnFreePorts() {
	s.T.Helper()
	const count = 10
	s.StartController(volume.PortRange{Base: int32(proccluster.FreePorts(s.T, count)), Count: count})
}

// NodeToken is a token of the NODE ServiceAccount bound to node's NODE Pod,
// as kubelet projects one into the Pod: the API server puts the node's name
// in its user extra (authentication.kubernetes.io/node-name), which the
// token-exchange policy reads.
func (s *Stack) NodeToken(node string) string {
	s.T.Helper()
	cs, err := kubernetes.NewForConfig(s.Env.Config)
	if err != nil {
		s.T.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(s.NS).Get(s.Ctx, NodePodName(node), metav1.GetOptions{})
	if err != nil {
		s.T.Fatalf("NODE Pod of %s: %v", node, err)
	}
	secs := int64(2 * time.Hour / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(s.NS).CreateToken(s.Ctx, NodeServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		s.T.Fatalf("token of %s bound to the NODE Pod of %s: %v", NodeServiceAccount, node, err)
	}
	return tr.Status.Token
}

// Kubeconfig writes a kubeconfig for the envtest API server (through the
// API gate when APIGated) that authenticates with token alone, and returns
// its path.
func (s *Stack) Kubeconfig(name, token string) string {
	s.T.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: s.gatedServer(), CertificateAuthorityData: s.Env.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: name}
	cfg.CurrentContext = "envtest"
	p := filepath.Join(s.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		s.T.Fatal(err)
	}
	return p
}

// StartHosts starts one replica-host process per node on its own Pod IP,
// dialling its node's local driver, authenticated by a token bound to its
// node's Pod (NodeToken). extraArgs are kept for RestartHost.
func (s *Stack) StartHosts(extraArgs ...string) {
	s.T.Helper()
	s.hostArgs = extraArgs
	for i, n := range s.Nodes {
		// Each host runs as the NODE ServiceAccount with a token bound to
		// its node's Pod, as in a cluster, so the generated roles and the
		// token-exchange policy are what a test exercises.
		n.kubeconfig = s.Kubeconfig(n.Name, s.NodeToken(n.Name))
		n.PodIP = PodIP(i)
		s.addPodIP(n.PodIP)
		n.Status = net.JoinHostPort(n.PodIP, fmt.Sprint(proccluster.FreePorts(s.T, 1)))
		s.startHost(n)
	}
}

// StopHost stops a node's replica-host process (SIGTERM, as the kubelet
// would) and waits for it to exit. Its state, journal and publications
// stay on disk.
func (s *Stack) StopHost(n *Node) {
	s.T.Helper()
	if err := n.Proc.Process.Signal(syscall.SIGTERM); err != nil {
		s.T.Fatalf("stop the host of %s: %v", n.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = n.Proc.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = n.Proc.Process.Kill()
		<-done
	}
}

// RestartHost starts a stopped node's replica-host process again with the
// same flags, Pod IP, status listener and state directory.
func (s *Stack) RestartHost(n *Node) {
	s.T.Helper()
	s.startHost(n)
}

func (s *Stack) startHost(n *Node) {
	s.T.Helper()
	state := filepath.Join(s.Dir, n.Name, "host-state")
	csitest.MkdirAll(s.T, state)
	logPath := filepath.Join(s.Dir, n.Name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.T.Fatal(err)
	}
	cmd := exec.Command(s.hostBinary, "-node", n.Name, "-namespace", s.NS, "-kubeconfig", n.kubeconfig, "-pod-ip", n.PodIP,
		"-status-listen", n.Status, "-state-dir", state, "-consumer-mount-root", n.ConsumerRoot,
		"-local-csi-endpoint", "unix://"+n.Socket, "-log-level", "info",
		"-status-interval", "200ms", "-journal-segment-bytes", "4194304")
	cmd.Args = append(append(cmd.Args, proccluster.FastTimingFlags()...), s.hostArgs...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		s.T.Fatal(err)
	}
	logf.Close()
	n.Proc = cmd
	name := n.Name
	s.T.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if s.T.Failed() {
			b, _ := os.ReadFile(logPath)
			s.T.Logf("log of the host on %s:\n%s", name, tail(string(b), 40))
		}
	})
}

// addPodIP adds a host's Pod IP to the loopback interface until the test ends.
func (s *Stack) addPodIP(ip string) {
	s.T.Helper()
	out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", "lo").CombinedOutput()
	switch {
	case err == nil:
		s.T.Cleanup(func() { _ = exec.Command("ip", "addr", "del", ip+"/32", "dev", "lo").Run() })
	case strings.Contains(string(out), "File exists") || strings.Contains(string(out), "already assigned"):
		// Another test of this process (or another process) added it: it
		// is theirs to remove.
	default:
		s.T.Fatalf("add Pod IP %s to lo (ip addr add): %v: %s", ip, err, out)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Replicas lists the VolumeReplicas of a volume.
func (s *Stack) Replicas(volumeName string) []storagev1alpha1.VolumeReplica {
	s.T.Helper()
	l := &storagev1alpha1.VolumeReplicaList{}
	if err := s.Env.Client.List(s.Ctx, l, client.InNamespace(s.NS), client.MatchingLabels{storagev1alpha1.LabelVolume: volumeName}); err != nil {
		s.T.Fatal(err)
	}
	return l.Items
}

// NodeNamed returns the stack's node of that name, or nil.
func (s *Stack) NodeNamed(name string) *Node {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
