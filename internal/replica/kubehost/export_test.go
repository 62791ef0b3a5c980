package kubehost

// Hooks for the external tests of the per-node token exchange (exchange.go):
// they run against a real API server, whose minimum token lifetime (ten
// minutes) a test cannot wait out, so they move the exchange's clock and look
// at the token it holds.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// NodeSecretReader reads Secrets as the host does, with the per-node token
// of its node.
type NodeSecretReader struct {
	secrets secretGetter
	tokens  *nodeTokens
}

// NewNodeSecretReader is the host's Secret reader for node, authenticated as
// cfg, judging renewal by the clock now.
func NewNodeSecretReader(cfg *rest.Config, namespace, node string, now func() time.Time) (*NodeSecretReader, error) {
	s, tokens, err := nodeSecretsAt(cfg, namespace, node, now)
	if err != nil {
		return nil, err
	}
	return &NodeSecretReader{secrets: s, tokens: tokens}, nil
}

// Get reads the Secret name.
func (r *NodeSecretReader) Get(ctx context.Context, name string) (*corev1.Secret, error) {
	return r.secrets.Get(ctx, name, metav1.GetOptions{})
}

// HeldToken is the per-node token the reader presents now ("" before the
// first exchange or after a refusal).
func (r *NodeSecretReader) HeldToken() string {
	r.tokens.mu.Lock()
	defer r.tokens.mu.Unlock()
	return r.tokens.token
}
