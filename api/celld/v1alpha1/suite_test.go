package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/testenv"
)

// env is the package's real kube-apiserver with the CRDs installed.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const (
	testNamespace = "default"
	pinnedImage   = "registry.example.com/celld/celld@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

var (
	fleetGVK       = celldv1alpha1.GroupVersion.WithKind("CelldFleet")
	reservationGVK = celldv1alpha1.GroupVersion.WithKind("CelldStorageReservation")
)

// object is an API object as a user writes it in YAML, so a test can send
// exactly the fields it means to (including none at all for a required one).
func object(gvk schema.GroupVersionKind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetName(name)
	return u
}

// persistentSpec is a valid PersistentFleet spec with only the required fields.
func persistentSpec() map[string]any {
	return map[string]any{
		"profile":      "PersistentFleet",
		"runtimeImage": pinnedImage,
		"storage": map[string]any{
			"bucket":           "fleet-bucket",
			"storageClassName": "fast-ssd",
			"sizeGiB":          int64(20),
		},
	}
}

// bucketSpec is a valid Bucket spec with only the required fields.
func bucketSpec() map[string]any {
	return map[string]any{
		"profile":      "Bucket",
		"runtimeImage": pinnedImage,
		"storage":      map[string]any{"bucket": "fleet-bucket"},
	}
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkOutcome fails the test unless err matches the expectation: accepted
// when want is empty, otherwise rejected with a message containing want.
func checkOutcome(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("the API server must accept %s, but it rejected it: %v", what, err)
	case want != "" && err == nil:
		t.Fatalf("the API server must reject %s with %q, but it accepted it", what, want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("the API server must reject %s with a message containing %q; got: %v", what, want, err)
	}
}

// sanitize turns a test name into an object name.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 60 {
		out = strings.Trim(out[len(out)-60:], "-")
	}
	return out
}
