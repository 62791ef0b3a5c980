package celldctl_test

// The plugin's tests run the real command in-process, exactly as a user's
// command line would (flags, kubeconfig and all), against a real
// kube-apiserver (envtest) with cellfleet's CRDs.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cellfleet/cellfleet/internal/celldctl"
	"github.com/cellfleet/cellfleet/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// contextNamespace is the namespace of the kubeconfig's second context,
// "elsewhere", so a test can tell --context was honoured.
const contextNamespace = "ctx-elsewhere"

var (
	kubeconfigOnce sync.Once
	kubeconfigPath string
	kubeconfigErr  error
)

// kubeconfig writes a kubeconfig file for the envtest API server with two
// contexts: "envtest" (namespace default, current) and "elsewhere".
func kubeconfig(t *testing.T) string {
	t.Helper()
	kubeconfigOnce.Do(func() {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
		cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData,
			ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
		cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: "default"}
		cfg.Contexts["elsewhere"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: contextNamespace}
		cfg.CurrentContext = "envtest"
		dir, err := os.MkdirTemp("", "celldctl-kubeconfig")
		if err != nil {
			kubeconfigErr = err
			return
		}
		kubeconfigPath = filepath.Join(dir, "kubeconfig")
		kubeconfigErr = clientcmd.WriteToFile(*cfg, kubeconfigPath)
	})
	if kubeconfigErr != nil {
		t.Fatalf("write kubeconfig: %v", kubeconfigErr)
	}
	return kubeconfigPath
}

// lockedBuffer is a bytes.Buffer a --watch may write to while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// plugin runs kubectl-celld with args against the envtest API server and
// returns what it printed on stdout and stderr.
func plugin(ctx context.Context, t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut lockedBuffer
	err = pluginTo(ctx, t, &out, &errOut, args...)
	return out.String(), errOut.String(), err
}

func pluginTo(ctx context.Context, t *testing.T, out, errOut *lockedBuffer, args ...string) error {
	t.Helper()
	cmd := celldctl.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig(t)}, args...))
	return cmd.ExecuteContext(ctx)
}

// mustPlugin is plugin that fails the test on an error.
func mustPlugin(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := plugin(ctx, t, args...)
	if err != nil {
		t.Fatalf("kubectl celld %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// seq makes the names of a test's objects unique, so the tests run again
// (-count=N) against the same API server.
var seq atomic.Int64

// unique returns base with a suffix no other call returns.
func unique(base string) string { return fmt.Sprintf("%s-%d", base, seq.Add(1)) }

// namespace creates a namespace named after base and returns its name.
func namespace(t *testing.T, base string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unique(base)}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", ns.Name, err)
	}
	return ns.Name
}

func loadSample(t *testing.T, file string, into client.Object) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
}

// lineOf returns the first line of out whose first field is first.
func lineOf(out, first string) string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first {
			return l
		}
	}
	return ""
}

// header returns the first line of out that starts (after indentation)
// with the given column name.
func header(out, first string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), first+" ") {
			return l
		}
	}
	return ""
}

// watching is a kubectl-celld --watch running in the background.
type watching struct {
	args        []string
	out, errOut lockedBuffer
	done        chan error
	start       time.Time
}

func watchInBackground(ctx context.Context, t *testing.T, args ...string) *watching {
	t.Helper()
	w := &watching{args: args, done: make(chan error, 1), start: time.Now()}
	go func() { w.done <- pluginTo(ctx, t, &w.out, &w.errOut, args...) }()
	return w
}

// waitFor waits until the output contains want at least n times.
func (w *watching) waitFor(t *testing.T, n int, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(w.out.String(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("kubectl celld %s did not print %q %d times within 10s:\n%s\nstderr: %s",
				strings.Join(w.args, " "), want, n, w.out.String(), w.errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ended asserts the watch ends without error soon after its
// --request-timeout (every test sets one of at most 5s).
func (w *watching) ended(t *testing.T) {
	t.Helper()
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("kubectl celld %s ended with %v", strings.Join(w.args, " "), err)
		}
		if d := time.Since(w.start); d > 15*time.Second {
			t.Errorf("kubectl celld %s ran %s", strings.Join(w.args, " "), d)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("kubectl celld %s did not end", strings.Join(w.args, " "))
	}
}
