package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cellfleet/cellfleet/internal/testenv"
)

// TestSamplesAreAccepted decodes each celld.eric.dev sample in config/samples
// and creates it on the API server: the samples users start from must be valid.
func TestSamplesAreAccepted(t *testing.T) {
	samples := []string{
		"celld_v1alpha1_celldfleet_bucket.yaml",
		"celld_v1alpha1_celldfleet_persistentfleet.yaml",
		"celld_v1alpha1_celldstoragereservation.yaml",
	}
	decoder := serializer.NewCodecFactory(env.Scheme).UniversalDeserializer()
	for _, name := range samples {
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t)
			raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", name))
			if err != nil {
				t.Fatalf("sample %s must exist: %v", name, err)
			}
			obj, gvk, err := decoder.Decode(raw, nil, nil)
			if err != nil {
				t.Fatalf("sample %s must decode as a cellfleet object: %v", name, err)
			}
			cobj, ok := obj.(client.Object)
			if !ok {
				t.Fatalf("sample %s decoded to %T, not an API object", name, obj)
			}
			if gvk.Kind == "CelldFleet" {
				cobj.SetNamespace(testNamespace)
			}
			if err := env.Client.Create(ctx, cobj); err != nil {
				t.Fatalf("the API server must accept sample %s: %v", name, err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(ctx, cobj) })
		})
	}
}
