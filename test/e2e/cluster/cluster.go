// Package cluster gives the qualification suites access to the local
// multi-node cluster that hack/cluster/cluster-up.sh brings up: API clients,
// fault injection on its daemons and workload processes, and its audit log.
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
)

// Cluster is a connection to the running local cluster.
type Cluster struct {
	Root       string // the repository (hack/cluster lives there)
	StateDir   string // .cluster: kubeconfig, logs, pids
	Kubeconfig string
	Config     *rest.Config
	Client     client.Client
	Kube       kubernetes.Interface
}

// Connect finds the repository from the working directory (test/e2e), reads
// .cluster/admin.kubeconfig (CLUSTER_DIR overrides .cluster) and checks the
// API server answers.
func Connect(ctx context.Context) (*Cluster, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	state := os.Getenv("CLUSTER_DIR")
	if state == "" {
		state = filepath.Join(root, ".cluster")
	}
	kc := filepath.Join(state, "admin.kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return nil, fmt.Errorf("no local cluster (%s): run make cluster-up or make e2e: %w", kc, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := celldv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
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
		return nil, fmt.Errorf("local cluster API server does not answer (%s): %w", kc, err)
	}
	return &Cluster{Root: root, StateDir: state, Kubeconfig: kc, Config: cfg, Client: c, Kube: kube}, nil
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

// Kubectl runs the cluster's kubectl with the admin kubeconfig.
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

// kubectlPath reads the binary directory cluster-up.sh recorded.
func (c *Cluster) kubectlPath() (string, error) {
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
// one of the cluster's daemons, e.g. kubelet-3.
func (c *Cluster) Daemon(ctx context.Context, action, name string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Root, "hack", "cluster", "node.sh"), action, name)
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+c.StateDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("node.sh %s %s: %w: %s", action, name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
