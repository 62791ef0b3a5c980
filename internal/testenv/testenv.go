// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest) with cellfleet's CRDs installed, for the suites that test API
// validation and controllers against the real API server.
//
// The binaries are built from pinned Go modules by hack/envtest-assets.sh;
// `make test` points KUBEBUILDER_ASSETS at them. A suite never skips because
// they are missing: Start fails and says how to build them.
//
// This package is imported by tests only; production code must never import it.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/cellfleet/cellfleet/internal/apischeme"
	"github.com/cellfleet/cellfleet/internal/testfs/memdir"
)

// Env is a running API server with the project's CRDs installed.
type Env struct {
	Config  *rest.Config
	Client  client.Client
	Scheme  *k8sruntime.Scheme
	Version string // the kube-apiserver's gitVersion, as it reports it

	env     *envtest.Environment
	etcdDir string
}

// startTimeout is how long each of etcd and kube-apiserver may take to
// start, unless KUBEBUILDER_CONTROLPLANE_START_TIMEOUT says otherwise (envtest
// reads it when the field is zero): envtest's 20 s is not enough on a 2-core
// CI machine that runs two test packages at once, one of them replica
// processes writing gigabytes (CI saw five starts in a row time out).
const startTimeout = 2 * time.Minute

// RepoRoot is the repository's root directory, found from this file's path so
// tests work from any package directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// ErrNoAssets says the API server binaries were not built.
var ErrNoAssets = errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test` " +
	"(it builds kube-apiserver and etcd with hack/envtest-assets.sh), or export " +
	"KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh)")

// Start starts etcd and kube-apiserver and installs the CRDs from config/crd/bases.
func Start() (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, ErrNoAssets
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS=%s has no kube-apiserver: %w", assets, err)
	}
	s, err := apischeme.New()
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                s,
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		te.ControlPlaneStartTimeout = startTimeout
	}
	// etcd's state in memory: envtest's etcd already skips fsync, but on the
	// disk its writes still wait behind every other test's writeback, and the
	// API server's start waits for etcd.
	etcdDir, err := memdir.MkdirTemp("cellfleet-envtest-etcd-")
	if err != nil {
		return nil, err
	}
	te.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir}
	cfg, err := te.Start()
	if err != nil {
		_ = os.RemoveAll(etcdDir)
		return nil, fmt.Errorf("start envtest (assets %s): %w", assets, err)
	}
	e := &Env{Config: cfg, Scheme: s, env: te, etcdDir: etcdDir}
	if e.Client, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("client for envtest: %w", err)
	}
	if e.Version, err = serverVersion(cfg); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

func serverVersion(cfg *rest.Config) (string, error) {
	c := rest.CopyConfig(cfg)
	c.NegotiatedSerializer = serializer.NewCodecFactory(k8sruntime.NewScheme()).WithoutConversion()
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return "", fmt.Errorf("discovery client: %w", err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("read kube-apiserver version: %w", err)
	}
	return v.GitVersion, nil
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error {
	err := e.env.Stop()
	if rmErr := os.RemoveAll(e.etcdDir); rmErr != nil && err == nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("stop envtest: %w", err)
	}
	return nil
}

// Main is a TestMain body: it starts one Env for the package's tests, stores
// it in *env, logs the API server's version, runs the tests and stops it.
func Main(m *testing.M, env **Env) { os.Exit(Run(m, env)) }

// Run is Main without the exit, for a TestMain with more to clean up: it
// returns the tests' exit code.
func Run(m *testing.M, env **Env) int {
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	slog.Info("envtest: real kube-apiserver running", "version", e.Version, "host", e.Config.Host)
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// ApplyFile creates every object of a YAML manifest (generated RBAC, say);
// objects that already exist are left as they are.
func (e *Env) ApplyFile(ctx context.Context, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s (make manifests generates it): %w", path, err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var u map[string]any
		if err := dec.Decode(&u); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("decode %s: %w", path, err)
		}
		if len(u) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetUnstructuredContent(u)
		if err := e.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s from %s: %w", obj.GetKind(), obj.GetName(), path, err)
		}
	}
}
