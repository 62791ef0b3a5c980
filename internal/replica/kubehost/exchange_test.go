package kubehost_test

// The per-node token exchange against a real kube-apiserver: its node-bound
// ServiceAccount tokens (the node's name in the user extra), its
// ValidatingAdmissionPolicy evaluation of config/node's policy, and RBAC of
// the generated roles and of the per-node Roles the real volume controller
// writes.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
	"github.com/cellfleet/cellfleet/internal/replica/kubehost"
	"github.com/cellfleet/cellfleet/internal/testenv"
	"github.com/cellfleet/cellfleet/internal/testenv/nodestack"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// asToken is a clientset authenticated by token alone.
func asToken(t *testing.T, token string) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// adminClientset is a clientset with the test's administrator credentials.
func adminClientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// exchange asks, as cs, for a token of ServiceAccount name living secs.
func exchange(t *testing.T, cs *kubernetes.Clientset, ns, name string, secs int64) (string, error) {
	t.Helper()
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// replicaOn creates a VolumeReplica on node and its `<replica>-tls` Secret,
// as the volume controller would.
func replicaOn(t *testing.T, s *nodestack.Stack, name, node string) {
	t.Helper()
	vr := &storagev1alpha1.VolumeReplica{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS, Labels: map[string]string{
			storagev1alpha1.LabelNode: node, storagev1alpha1.LabelVolume: "xchg"}},
		Spec: storagev1alpha1.VolumeReplicaSpec{VolumeName: "xchg", Node: node, Port: 40000, BackingClaimName: name, Generation: 1},
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-tls", Namespace: s.NS,
		Labels: map[string]string{storagev1alpha1.LabelReplica: name, storagev1alpha1.LabelNode: node}},
		Data: map[string][]byte{storagev1alpha1.SecretKeyKey: []byte("key of " + name)}}
	if err := env.Client.Create(t.Context(), vr); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(t.Context(), vr)
		_ = env.Client.Delete(t.Context(), sec)
	})
}

// storageControllerUser is the storage controller's ServiceAccount, which
// the generated volume roles are bound to (docs/install.md, "Two
// Deployments").
const storageControllerUser = "system:serviceaccount:cellfleet-system:cellfleet-storage-controller"

// asManager is a client impersonating the storage controller's
// ServiceAccount, with
// config/rbac/volume applied.
func asManager(t *testing.T) client.Client {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cellfleet-system"}}
	if err := env.Client.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, f := range []string{"role.yaml", "role_binding.yaml"} {
		if err := env.ApplyFile(t.Context(), filepath.Join(testenv.RepoRoot(), "config", "rbac", "volume", f)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: storageControllerUser}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// keepNodeCredentials runs the real volume controller's per-node
// credentials reconcile for nodes, as the storage controller's ServiceAccount with the
// generated volume roles (the API server's escalation check must let it
// grant get on Secrets it may read itself), and returns a function that
// runs it again, as the controller does on every VolumeReplica change.
func keepNodeCredentials(t *testing.T, s *nodestack.Stack, nodes ...string) (again func()) {
	t.Helper()
	r, err := volume.New(asManager(t), env.Scheme, volume.Options{Namespace: s.NS, ManagerNamespace: s.ManagerNS})
	if err != nil {
		t.Fatal(err)
	}
	creds := r.NodeCredentials()
	again = func() {
		t.Helper()
		for _, n := range nodes {
			if _, err := creds.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: n}}); err != nil {
				t.Fatalf("per-node credentials of %s: %v", n, err)
			}
		}
	}
	again()
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = env.Client.Delete(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: storagev1alpha1.NodeCredentialsName(n)}})
		}
	})
	return again
}

func isDenied(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) }

func TestNodeTokenExchangeIsBoundToTheCallersNode(t *testing.T) {
	s := nodestack.New(t, env, hostBinary, "kh-xchg-system")
	a, b := s.AddNode("kh-xchg-a"), s.AddNode("kh-xchg-b")
	replicaOn(t, s, "xchg-r0", a.Name)
	replicaOn(t, s, "xchg-r1", b.Name)
	keepNodeCredentials(t, s, a.Name, b.Name)
	saA, saB := storagev1alpha1.NodeCredentialsName(a.Name), storagev1alpha1.NodeCredentialsName(b.Name)
	onA := asToken(t, s.NodeToken(a.Name))

	// The policy is in force once the API server's policy informer has it:
	// until then RBAC alone would admit the exchange.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := exchange(t, onA, s.NS, saB, 3600)
		if isDenied(err) && strings.Contains(err.Error(), "may exchange its token only for "+saA) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the token bound to a Pod on %s exchanged for %s's ServiceAccount %s: err = %v, want the policy's denial", a.Name, b.Name, saB, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	tokA, err := exchange(t, onA, s.NS, saA, 3600)
	if err != nil {
		t.Fatalf("the token bound to a Pod on %s exchanged for %s: %v", a.Name, saA, err)
	}
	if _, err := exchange(t, onA, s.NS, saA, 7200); !isDenied(err) {
		t.Errorf("a two-hour per-node token was issued (err = %v), want the policy's one-hour bound", err)
	}
	perA := asToken(t, tokA)
	sec, err := perA.CoreV1().Secrets(s.NS).Get(t.Context(), "xchg-r0-tls", metav1.GetOptions{})
	if err != nil || string(sec.Data[storagev1alpha1.SecretKeyKey]) != "key of xchg-r0" {
		t.Fatalf("%s reads its replica's Secret xchg-r0-tls: err = %v", saA, err)
	}
	if _, err := perA.CoreV1().Secrets(s.NS).Get(t.Context(), "xchg-r1-tls", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("%s read %s's replica Secret xchg-r1-tls: err = %v, want 403", saA, b.Name, err)
	}
	if _, err := perA.CoreV1().Secrets(s.NS).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("%s listed the namespace's Secrets: err = %v, want 403", saA, err)
	}

	// A token of the NODE ServiceAccount bound to no Pod carries no node.
	unbound, err := exchange(t, adminClientset(t), s.NS, nodestack.NodeServiceAccount, 3600)
	if err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{saA, saB} {
		_, err := exchange(t, asToken(t, unbound), s.NS, sa, 3600)
		if !isDenied(err) || !strings.Contains(err.Error(), "bound to a Pod on a node") {
			t.Errorf("a NODE token without node claims exchanged for %s: err = %v, want the policy's denial", sa, err)
		}
	}

	// The shared identity reads no Secret, bound to a node or not.
	for _, tok := range []string{s.NodeToken(a.Name), unbound} {
		for _, name := range []string{"xchg-r0-tls", "xchg-r1-tls"} {
			if _, err := asToken(t, tok).CoreV1().Secrets(s.NS).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("the NODE ServiceAccount read Secret %s: err = %v, want 403", name, err)
			}
		}
	}
}

// testClock is the clock the exchange judges renewal by, moved by the test:
// the API server issues tokens of at least ten minutes.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// hostSecretReader is the host's Secret reader on node, authenticated by a
// token bound to the node's Pod, judging renewal by clock.
func hostSecretReader(t *testing.T, s *nodestack.Stack, node string, clock *testClock) *kubehost.NodeSecretReader {
	t.Helper()
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = s.NodeToken(node)
	r, err := kubehost.NewNodeSecretReader(cfg, s.NS, node, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readsItsReplicasSecret fails the test unless r reads replica's Secret.
func readsItsReplicasSecret(t *testing.T, r *kubehost.NodeSecretReader, replica, when string) {
	t.Helper()
	sec, err := r.Get(t.Context(), replica+"-tls")
	if err != nil || string(sec.Data[storagev1alpha1.SecretKeyKey]) != "key of "+replica {
		t.Fatalf("%s, the host reads its replica's Secret %s-tls: err = %v", when, replica, err)
	}
}

func TestNodeTokenIsExchangedAgainOnlyOnceMostOfItsLifetimeHasPassed(t *testing.T) {
	s := nodestack.New(t, env, hostBinary, "kh-renew-system")
	a := s.AddNode("kh-renew-a")
	replicaOn(t, s, "renew-r0", a.Name)
	keepNodeCredentials(t, s, a.Name)
	clock := &testClock{now: time.Now()}
	r := hostSecretReader(t, s, a.Name, clock)

	readsItsReplicasSecret(t, r, "renew-r0", "first")
	first := r.HeldToken()
	if first == "" {
		t.Fatal("the host holds no per-node token after a read")
	}
	clock.Advance(kubehost.NodeTokenLifetime * 3 / 4)
	readsItsReplicasSecret(t, r, "renew-r0", "at 75% of the token's lifetime")
	if r.HeldToken() != first {
		t.Errorf("the host exchanged its per-node token at 75%% of its lifetime, want it kept until 80%%")
	}
	clock.Advance(kubehost.NodeTokenLifetime / 10)
	readsItsReplicasSecret(t, r, "renew-r0", "at 85% of the token's lifetime")
	if r.HeldToken() == first {
		t.Errorf("the host still presents the token it exchanged first at 85%% of its lifetime, want a new one once 80%% has passed")
	}
}

func TestNodeTokenRefusedByTheAPIServerIsExchangedAnewOnTheNextRead(t *testing.T) {
	s := nodestack.New(t, env, hostBinary, "kh-refused-system")
	a := s.AddNode("kh-refused-a")
	replicaOn(t, s, "refused-r0", a.Name)
	again := keepNodeCredentials(t, s, a.Name)
	r := hostSecretReader(t, s, a.Name, &testClock{now: time.Now()})
	readsItsReplicasSecret(t, r, "refused-r0", "before its ServiceAccount is made again")
	first := r.HeldToken()

	// Deleting the per-node ServiceAccount invalidates every token issued
	// for it; the controller makes it again at the same name, so the held
	// token, far from due, is refused (401) by the API server.
	sa := &corev1.ServiceAccount{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: s.NS, Name: storagev1alpha1.NodeCredentialsName(a.Name)}, sa); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), sa, client.Preconditions{UID: &sa.UID}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the API server refuses the token of the deleted ServiceAccount", func() error {
		if _, err := asToken(t, first).CoreV1().Secrets(s.NS).Get(t.Context(), "refused-r0-tls", metav1.GetOptions{}); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("err = %v, want 401", err)
		}
		return nil
	})
	again()
	if _, err := r.Get(t.Context(), "refused-r0-tls"); !apierrors.IsUnauthorized(err) {
		t.Fatalf("the first read after the ServiceAccount was made again: err = %v, want 401 for the held token", err)
	}
	// The next read exchanges anew (the new ServiceAccount reaches the API
	// server's authenticator through its informer, hence the deadline).
	poll.Until(t, 30*time.Second, "the host reads its replica's Secret again after a 401", func() error {
		_, err := r.Get(t.Context(), "refused-r0-tls")
		return err
	})
	if r.HeldToken() == first {
		t.Errorf("the host reads with the token the API server refused")
	}
}
