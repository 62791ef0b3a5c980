package replicated_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/csitest/loopowner"
	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
)

// TestStagingAndTargetPathTricksAreRefused: traversal and symlinks in
// staging or target paths are InvalidArgument, the owner is never asked to
// mount there, and nothing is mounted at a symlink's destination.
func TestStagingAndTargetPathTricksAreRefused(t *testing.T) {
	csitest.RequireRoot(t)
	base := t.TempDir()
	kubelet := filepath.Join(base, "kubelet")
	outside := filepath.Join(base, "outside")
	csitest.MkdirAll(t, filepath.Join(kubelet, "pods"), outside, filepath.Join(base, "owner-data", "rv-1"), filepath.Join(base, "state"))
	owner, ownerSocket := serveOwner(t, base)
	csitest.CleanupMounts(t, base)
	if err := os.Symlink(outside, filepath.Join(kubelet, "pods", "link")); err != nil {
		t.Fatal(err)
	}
	d, err := replicated.New(replicated.Options{NodeID: "node-a", StateDir: filepath.Join(base, "state"),
		PathRoots: []string{kubelet}, MountOwner: replicated.NewOwnerClient(ownerSocket)})
	if err != nil {
		t.Fatal(err)
	}
	n := d.Node()
	ctx := context.Background()
	c := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}
	bad := []string{
		kubelet + "/pods/../../outside",
		filepath.Join(kubelet, "pods", "link"),
		filepath.Join(kubelet, "pods", "link", "deeper"),
		filepath.Join(outside, "staging"),
		"pods/relative",
	}
	for _, p := range bad {
		_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "rv-1", StagingTargetPath: p, VolumeCapability: c,
			VolumeContext: loopowner.VolumeContext("rv-1"), Secrets: loopowner.Secrets()})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("NodeStageVolume at %q must be refused as InvalidArgument, got %v", p, err)
		}
	}
	mounts := owner.List()
	if len(mounts) != 0 {
		t.Fatalf("the mount owner must never be asked to mount at a refused path, it holds %v", mounts)
	}

	staging := filepath.Join(kubelet, "staging-rv-1")
	if _, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "rv-1", StagingTargetPath: staging, VolumeCapability: c,
		VolumeContext: loopowner.VolumeContext("rv-1"), Secrets: loopowner.Secrets()}); err != nil {
		t.Fatalf("NodeStageVolume at a plain path: %v", err)
	}
	for _, p := range bad {
		_, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "rv-1", StagingTargetPath: staging,
			TargetPath: p, VolumeCapability: c})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("NodePublishVolume to %q must be refused as InvalidArgument, got %v", p, err)
		}
	}
	if ok, _ := mountpath.IsMountPoint(mountpath.SelfMountInfo, outside); ok {
		t.Fatalf("nothing may be mounted at a symlink's destination")
	}
	if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "rv-1", StagingTargetPath: staging}); err != nil {
		t.Fatalf("NodeUnstageVolume: %v", err)
	}
}
