package v1alpha1_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// The per-node name is the token-exchange policy's exact rule
// (cellfleet-node-<node>) for every node name it can fit, and a valid,
// distinct ServiceAccount name for every other.
func TestNodeCredentialsName(t *testing.T) {
	fits := strings.Repeat("n", 253-len(storagev1alpha1.NodeCredentialsPrefix))
	for _, node := range []string{"a", "worker-1.example.com", fits} {
		if got := storagev1alpha1.NodeCredentialsName(node); got != storagev1alpha1.NodeCredentialsPrefix+node {
			t.Errorf("NodeCredentialsName(%q) = %q, want the prefix and the node name unchanged", node, got)
		}
	}
	long1, long2 := fits+"x.a", fits+"x.b"
	n1, n2 := storagev1alpha1.NodeCredentialsName(long1), storagev1alpha1.NodeCredentialsName(long2)
	if n1 == n2 {
		t.Errorf("two node names longer than fits share the per-node name %q", n1)
	}
	for _, n := range []string{n1, n2, storagev1alpha1.NodeCredentialsName(fits)} {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("%q is not a valid ServiceAccount name: %v", n, errs)
		}
	}
}
