package controller

import (
	"testing"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
)

// The StorageClass passes the volume controller's mount Secret
// (<volume>-mount) to NodeStageVolume, whose node side reads it by the keys
// of internal/csi/replicated; the two packages cannot share the constants
// (the node side stays free of the API types), so this holds them equal.
func TestNodeStageReadsTheMountSecretsKeys(t *testing.T) {
	if replicated.SecretToken != storagev1alpha1.SecretKeyMountToken {
		t.Errorf("NodeStage reads the token under %q, the volume controller writes it under %q",
			replicated.SecretToken, storagev1alpha1.SecretKeyMountToken)
	}
	if replicated.SecretCA != storagev1alpha1.SecretKeyCACert {
		t.Errorf("NodeStage reads the CA under %q, the volume controller writes it under %q",
			replicated.SecretCA, storagev1alpha1.SecretKeyCACert)
	}
}
