package replicated_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/csitest/loopowner"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
)

// NodeExpandVolume answers with what statfs through the real mount shows
// once it reaches the request, and a retryable Unavailable before.
func TestNodeExpandVolumeAnswersOnceTheMountServesTheRequest(t *testing.T) {
	csitest.RequireRoot(t)
	base := t.TempDir()
	kubelet := filepath.Join(base, "kubelet")
	csitest.MkdirAll(t, filepath.Join(kubelet, "pods"), filepath.Join(base, "owner-data", "rv-grow"), filepath.Join(base, "state"))
	_, ownerSocket := serveOwner(t, base)
	csitest.CleanupMounts(t, base)
	d, err := replicated.New(replicated.Options{NodeID: "node-a", StateDir: filepath.Join(base, "state"),
		PathRoots: []string{kubelet}, MountOwner: replicated.NewOwnerClient(ownerSocket)})
	if err != nil {
		t.Fatal(err)
	}
	n, ctx := d.Node(), context.Background()
	c := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	staging := filepath.Join(kubelet, "staging")
	if _, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "rv-grow", StagingTargetPath: staging, VolumeCapability: c,
		VolumeContext: loopowner.VolumeContext("rv-grow"), Secrets: loopowner.Secrets()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "rv-grow", StagingTargetPath: staging})
	})
	var st unix.Statfs_t
	if err := unix.Statfs(staging, &st); err != nil {
		t.Fatal(err)
	}
	served := int64(st.Blocks) * st.Bsize
	resp, err := n.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "rv-grow", VolumePath: staging,
		CapacityRange: &csi.CapacityRange{RequiredBytes: served}})
	if err != nil || resp.CapacityBytes != served {
		t.Fatalf("NodeExpandVolume of the served size: %+v %v, want %d", resp, err, served)
	}
	_, err = n.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "rv-grow", VolumePath: staging,
		CapacityRange: &csi.CapacityRange{RequiredBytes: served + 1<<30}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("NodeExpandVolume past the served size: %v, want Unavailable (retried until the coordinator commits it)", err)
	}
	_, err = n.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "rv-other", VolumePath: staging,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("NodeExpandVolume of a volume not staged here: %v, want NotFound", err)
	}
}
