package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/cellfleet/cellfleet/internal/testenv"
)

// The manager's metrics endpoint, on a real API server: a ServiceAccount
// bound to the shipped metrics-reader ClusterRole reads /metrics, a request
// without a token is unauthenticated (401), and a valid token of an account
// without that role is forbidden (403).
func TestMetricsEndpointAuthorisesThroughTheAPIServer(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	opts, err := parseFlags([]string{"--metrics-bind-address=" + freeLoopbackAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsOptions(opts), HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manager: %v", err)
		}
	})

	cs := kubernetes.NewForConfigOrDie(env.Config)
	const ns = "default"
	reader := serviceAccountToken(ctx, t, cs, ns, "prometheus")
	stranger := serviceAccountToken(ctx, t, cs, ns, "stranger")
	role := shippedMetricsReaderRole(t)
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	url := "https://" + opts.metricsAddr + "/metrics"
	// RBAC caches settle within moments; wait for the reader's first 200.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := scrape(t, url, reader)
		if code == http.StatusOK {
			if len(body) == 0 {
				t.Fatal("the metrics reader got 200 with an empty body")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a ServiceAccount bound to %s got %d from %s, want 200: %s", role.Name, code, url, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, body := scrape(t, url, ""); code != http.StatusUnauthorized {
		t.Errorf("a scrape with no token got %d, want 401: %s", code, body)
	}
	if code, body := scrape(t, url, stranger); code != http.StatusForbidden {
		t.Errorf("a ServiceAccount without the metrics-reader role got %d, want 403: %s", code, body)
	}
}

// shippedMetricsReaderRole reads the ClusterRole the kustomize tree ships, so
// the test proves that role (not one written here) grants the scrape.
func shippedMetricsReaderRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "metrics", "metrics_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var r rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(raw, &r); err != nil {
		t.Fatalf("metrics_reader_role.yaml: %v", err)
	}
	return &r
}

func serviceAccountToken(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	// The endpoint's certificate is self-signed at start (no --metrics-cert-path).
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	// The start of the body is enough to show in a failure.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	return resp.StatusCode, string(b)
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}
