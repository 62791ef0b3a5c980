package testenv_test

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cellfleet/cellfleet/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// TestRealAPIServerWithCRDs proves the suites run on the kube-apiserver built
// from the pinned module (v1.37.x), with every cellfleet CRD served.
func TestRealAPIServerWithCRDs(t *testing.T) {
	t.Logf("kube-apiserver %s at %s", env.Version, env.Config.Host)
	if !strings.HasPrefix(env.Version, "v1.37.") {
		t.Fatalf("kube-apiserver reports %q, want the pinned v1.37.x build", env.Version)
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	s := env.Scheme
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), &crds); err != nil {
		t.Fatalf("list CRDs: %v", err)
	}
	got := map[string]bool{}
	for _, crd := range crds.Items {
		got[crd.Name] = true
	}
	for _, want := range []string{
		"celldfleets.celld.eric.dev", "celldstoragereservations.celld.eric.dev",
		"replicatedvolumes.storage.eric.dev", "volumereplicas.storage.eric.dev",
	} {
		if !got[want] {
			t.Errorf("CRD %s is not installed from config/crd/bases", want)
		}
	}
}
