package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/testenv"
)

// TestSamplesAreAcceptedByTheAPIServer creates each storage sample from
// config/samples on the API server: a sample that the schema rejects would
// mislead every reader of the docs.
func TestSamplesAreAcceptedByTheAPIServer(t *testing.T) {
	cases := []struct {
		file string
		obj  client.Object
	}{
		{file: "storage_v1alpha1_replicatedvolume.yaml", obj: &storagev1alpha1.ReplicatedVolume{}},
		{file: "storage_v1alpha1_volumereplica.yaml", obj: &storagev1alpha1.VolumeReplica{}},
	}
	ctx := testContext(t)
	ensureNamespace(t, ctx)
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", tc.file))
			if err != nil {
				t.Fatalf("read sample: %v", err)
			}
			if err := yaml.UnmarshalStrict(raw, tc.obj); err != nil {
				t.Fatalf("sample %s must decode into its kind without unknown fields: %v", tc.file, err)
			}
			if err := env.Client.Create(ctx, tc.obj); err != nil {
				t.Fatalf("the API server must accept sample %s: %v", tc.file, err)
			}
			cleanupObject(t, tc.obj)
		})
	}
}
