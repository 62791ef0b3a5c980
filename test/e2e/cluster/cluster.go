// Package cluster gives the qualification suites access to the cluster they
// run on: API clients always; on the local multi-node cluster that
// hack/cluster/cluster-up.sh brings up also its own powers (fault injection
// on its daemons and workload processes, its volumes' directories, its audit
// log). E2E_KUBECONFIG points the suites at any other cluster instead; the
// suites that need a power that cluster lacks skip and say which.
//
// It owns how the suites reach the cluster and must never import the
// operator's code: the suites judge the operator from the outside.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Environment that points the suites at a cluster other than the local one.
const (
	// EnvKubeconfig names the kubeconfig of an existing cluster to run on
	// instead of the local cluster of make e2e.
	EnvKubeconfig = "E2E_KUBECONFIG"
	// EnvAuditLog names that cluster's API server audit log, readable from
	// here, when it has one (the local cluster's is always read).
	EnvAuditLog = "E2E_AUDIT_LOG"
	// EnvKubectl names the kubectl to use on that cluster (default: kubectl
	// on PATH).
	EnvKubectl = "E2E_KUBECTL"
)

// Power is something a scenario needs beyond the API server.
type Power string

// The powers only the local cluster gives: every node shares this host's
// kernel, network namespace and filesystem, and hack/cluster runs its
// daemons.
const (
	PowerHostProcesses Power = "kill -9 of a container's process through this host's /proc"
	PowerDaemons       Power = "stopping and restarting a node's kubelet (hack/cluster/node.sh)"
	PowerHostDisks     Power = "the local volumes' directories on this host"
	PowerAuditLog      Power = "reading the API server's audit log (" + EnvAuditLog + " names one elsewhere)"
)

// Cluster is a connection to the cluster the suites run on.
type Cluster struct {
	Root       string // the repository (hack/cluster lives there)
	StateDir   string // .cluster: kubeconfig, logs, pids; "" on another cluster
	Kubeconfig string
	Config     *rest.Config
	Client     client.Client
	Kube       kubernetes.Interface
	// Local is the local cluster of hack/cluster, with every Power.
	Local bool
	// AuditLog is the API server's audit log, "" when none is readable.
	AuditLog string
}

// Has says the cluster gives the suites power p.
func (c *Cluster) Has(p Power) bool {
	if p == PowerAuditLog {
		return c.AuditLog != ""
	}
	return c.Local
}

// Connect finds the repository from the working directory (test/e2e), reads
// the kubeconfig (E2E_KUBECONFIG, else the local cluster's
// .cluster/admin.kubeconfig; CLUSTER_DIR overrides .cluster) and checks the
// API server answers.
func Connect(ctx context.Context) (*Cluster, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Root: root, Kubeconfig: os.Getenv(EnvKubeconfig), AuditLog: os.Getenv(EnvAuditLog)}
	if c.Kubeconfig == "" {
		c.Local = true
		c.StateDir = os.Getenv("CLUSTER_DIR")
		if c.StateDir == "" {
			c.StateDir = filepath.Join(root, ".cluster")
		}
		c.Kubeconfig = filepath.Join(c.StateDir, "admin.kubeconfig")
		c.AuditLog = filepath.Join(c.StateDir, "logs", "audit.log")
	}
	kc := c.Kubeconfig
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		if c.Local {
			return nil, fmt.Errorf("no local cluster (%s): run make cluster-up or make e2e, or set %s: %w", kc, EnvKubeconfig, err)
		}
		return nil, fmt.Errorf("read %s=%s: %w", EnvKubeconfig, kc, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := celldv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := storagev1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", kc, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, fmt.Errorf("API server does not answer (%s): %w", kc, err)
	}
	c.Config, c.Client, c.Kube = cfg, cl, kube
	return c, nil
}

// repoRoot walks up from the working directory to the directory holding go.work.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "cluster", "cluster-up.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root (hack/cluster/cluster-up.sh) above the working directory")
		}
		dir = parent
	}
}

// Kubectl runs kubectl with the cluster's kubeconfig.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	bin, err := c.kubectlPath()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// kubectlPath is E2E_KUBECTL, else on the local cluster the binary
// directory cluster-up.sh recorded, else kubectl on PATH.
func (c *Cluster) kubectlPath() (string, error) {
	if p := os.Getenv(EnvKubectl); p != "" {
		return p, nil
	}
	if !c.Local {
		p, err := exec.LookPath("kubectl")
		if err != nil {
			return "", fmt.Errorf("no kubectl for %s: set %s or put kubectl on PATH: %w", c.Kubeconfig, EnvKubectl, err)
		}
		return p, nil
	}
	b, err := os.ReadFile(filepath.Join(c.StateDir, "bin.env"))
	if err != nil {
		return "", fmt.Errorf("read %s/bin.env (written by cluster-up.sh): %w", c.StateDir, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "K8S="); ok {
			return filepath.Join(strings.Trim(v, `'"`), "kubectl"), nil
		}
	}
	return "", fmt.Errorf("%s/bin.env names no K8S directory", c.StateDir)
}

// Daemon runs hack/cluster/node.sh ACTION NAME: "kill" (SIGKILL) or "start"
// one of the local cluster's daemons, e.g. kubelet-3.
func (c *Cluster) Daemon(ctx context.Context, action, name string) error {
	if !c.Has(PowerDaemons) {
		return fmt.Errorf("node.sh %s %s: %s needs the local cluster", action, name, PowerDaemons)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.Root, "hack", "cluster", "node.sh"), action, name)
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+c.StateDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("node.sh %s %s: %w: %s", action, name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
