package kubehost

// The per-node token exchange (docs/decisions/0007-per-node-credentials.md).
// The host's own identity, the NODE ServiceAccount cellfleet-node, reads no
// Secret. It creates a short-lived token of its node's ServiceAccount
// cellfleet-node-<node> (TokenRequest), which the token-exchange admission
// policy admits only when the caller's own token is bound to a Pod on that
// node, and reads its replicas' Secrets with that token: the volume
// controller's Role for the ServiceAccount names exactly those Secrets.
//
// The token is requested on first use and again once most of its lifetime
// has passed; a failed exchange fails the Secret read, which the credentials
// refresh already survives by serving on the files it wrote (credentials.go).

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// NodeTokenLifetime is the lifetime the host asks for its per-node token:
// the admission policy admits at most an hour.
const NodeTokenLifetime = time.Hour

// nodeTokenRenewal is the fraction of a token's lifetime after which it is
// exchanged again, so a Secret read never presents a token about to expire.
const nodeTokenRenewal = 0.8

// secretGetter reads one Secret by name (no list or watch).
type secretGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
}

// nodeTokens holds the current per-node token and exchanges it again when
// due.
type nodeTokens struct {
	accounts corev1client.ServiceAccountInterface // as the host's own identity
	name     string                               // cellfleet-node-<node>
	// now is the clock renewal is judged by: time.Now, except in tests,
	// which cannot wait out the API server's ten-minute minimum lifetime.
	now     func() time.Time
	mu      sync.Mutex
	token   string
	renewAt time.Time
}

// current returns a token of the per-node ServiceAccount, exchanging the
// host's own for a new one when none is held or the held one is due.
func (n *nodeTokens) current(ctx context.Context) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.token != "" && n.now().Before(n.renewAt) {
		return n.token, nil
	}
	secs := int64(NodeTokenLifetime / time.Second)
	tr, err := n.accounts.CreateToken(ctx, n.name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("exchange the host's token for ServiceAccount %s's: %w", n.name, err)
	}
	issued := n.now()
	life := tr.Status.ExpirationTimestamp.Sub(issued)
	if life <= 0 {
		return "", fmt.Errorf("token of ServiceAccount %s expires at %s, already past", n.name, tr.Status.ExpirationTimestamp)
	}
	n.token, n.renewAt = tr.Status.Token, issued.Add(time.Duration(float64(life)*nodeTokenRenewal))
	return n.token, nil
}

// forget drops the held token: the API server refused it (its ServiceAccount
// was removed and made again, say), so the next read exchanges anew.
func (n *nodeTokens) forget(token string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.token == token {
		n.token = ""
	}
}

// nodeBearer presents the current per-node token on every request.
type nodeBearer struct {
	tokens *nodeTokens
	next   http.RoundTripper
}

func (b *nodeBearer) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := b.tokens.current(req.Context())
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		b.tokens.forget(tok)
	}
	return resp, err
}

// nodeSecrets returns the Secrets of namespace as read with the per-node
// ServiceAccount of node, whose tokens cfg's identity obtains.
func nodeSecrets(cfg *rest.Config, namespace, node string) (secretGetter, error) {
	secrets, _, err := nodeSecretsAt(cfg, namespace, node, time.Now)
	return secrets, err
}

// nodeSecretsAt is nodeSecrets judging renewal by the clock now, and the
// tokens it holds.
func nodeSecretsAt(cfg *rest.Config, namespace, node string, now func() time.Time) (secretGetter, *nodeTokens, error) {
	own, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("client of the host's own identity: %w", err)
	}
	tokens := &nodeTokens{accounts: own.ServiceAccounts(namespace), name: storagev1alpha1.NodeCredentialsName(node), now: now}
	// No credential of the host's own goes with these requests: only the
	// per-node token, so a missing grant shows as a 403 here rather than
	// being covered by the host's identity.
	per := rest.AnonymousClientConfig(cfg)
	per.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &nodeBearer{tokens: tokens, next: rt} })
	c, err := corev1client.NewForConfig(per)
	if err != nil {
		return nil, nil, fmt.Errorf("client of ServiceAccount %s: %w", tokens.name, err)
	}
	return c.Secrets(namespace), tokens, nil
}
