package replicated_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/csitest/loopowner"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
)

// TestReadOnlyPublicationRefusesWritesWhileTheStagingStaysWritable.
func TestReadOnlyPublicationRefusesWritesWhileTheStagingStaysWritable(t *testing.T) {
	csitest.RequireRoot(t)
	base := t.TempDir()
	kubelet := filepath.Join(base, "kubelet")
	csitest.MkdirAll(t, filepath.Join(kubelet, "pods"), filepath.Join(base, "owner-data", "rv-ro"), filepath.Join(base, "state"))
	_, ownerSocket := serveOwner(t, base)
	csitest.CleanupMounts(t, base)
	d, err := replicated.New(replicated.Options{NodeID: "node-a", StateDir: filepath.Join(base, "state"),
		PathRoots: []string{kubelet}, MountOwner: replicated.NewOwnerClient(ownerSocket)})
	if err != nil {
		t.Fatal(err)
	}
	n, ctx := d.Node(), context.Background()
	c := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}
	staging, ro, rw := filepath.Join(kubelet, "staging"), filepath.Join(kubelet, "pods", "ro"), filepath.Join(kubelet, "pods", "rw")
	if _, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "rv-ro", StagingTargetPath: staging, VolumeCapability: c,
		VolumeContext: loopowner.VolumeContext("rv-ro"), Secrets: loopowner.Secrets()}); err != nil {
		t.Fatal(err)
	}
	for target, readOnly := range map[string]bool{ro: true, rw: false} {
		if _, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "rv-ro", StagingTargetPath: staging,
			TargetPath: target, VolumeCapability: c, Readonly: readOnly}); err != nil {
			t.Fatalf("publish %s: %v", target, err)
		}
	}
	if err := os.WriteFile(filepath.Join(ro, "x"), []byte("x"), 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("a write through a read-only publication must fail with EROFS, got %v", err)
	}
	if err := os.WriteFile(filepath.Join(rw, "x"), []byte("x"), 0o644); err != nil {
		t.Fatalf("a write through the read-write publication of the same staging must work: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(ro, "x")); err != nil || string(got) != "x" {
		t.Fatalf("the read-only publication must read what was written, got %q (%v)", got, err)
	}
	for _, target := range []string{ro, rw} {
		if _, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "rv-ro", TargetPath: target}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "rv-ro", StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
}
