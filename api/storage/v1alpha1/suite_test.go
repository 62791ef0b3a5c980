package v1alpha1_test

// The storage API's validation, defaults and immutability are tested against
// a real kube-apiserver and etcd with the generated CRDs installed
// (internal/testenv): what these tests prove is what the cluster enforces.

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cellfleet/cellfleet/internal/testenv"
)

var env *testenv.Env

// driverNamespace stands for the driver's namespace, where VolumeReplicas live.
const driverNamespace = "cellfleet-system"

func TestMain(m *testing.M) { testenv.Main(m, &env) }

var nameSeq atomic.Int64

// uniqueName returns a fresh DNS-1035 label so cases never collide.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, nameSeq.Add(1))
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ensureNamespace creates the driver namespace once per package run.
func ensureNamespace(t *testing.T, ctx context.Context) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: driverNamespace}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", driverNamespace, err)
	}
}

// expectVerdict checks an API server answer against a case: accepted when
// wantErr is empty, otherwise rejected as Invalid with every wanted fragment
// in the message.
func expectVerdict(t *testing.T, what string, err error, wantErr []string) {
	t.Helper()
	if len(wantErr) == 0 {
		if err != nil {
			t.Fatalf("the API server must accept %s, but it answered: %v", what, err)
		}
		return
	}
	if err == nil {
		t.Fatalf("the API server must reject %s with %q, but it accepted it", what, wantErr)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("the API server must reject %s as Invalid, got: %v", what, err)
	}
	for _, frag := range wantErr {
		if !strings.Contains(err.Error(), frag) {
			t.Fatalf("rejection of %s must say %q, it said: %v", what, frag, err)
		}
	}
}

// cleanupObject deletes obj when the test ends.
func cleanupObject(t *testing.T, obj client.Object) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := env.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s: %v", obj.GetName(), err)
		}
	})
}
