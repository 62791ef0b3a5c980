package local_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func (f *fixture) totalBytes(t *testing.T, id, target string) int64 {
	t.Helper()
	resp, err := f.node.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
	if err != nil {
		t.Fatalf("NodeGetVolumeStats: %v", err)
	}
	return resp.GetUsage()[0].GetTotal()
}

// Expansion is nominal but durable: the recorded size survives a restart,
// NodeExpandVolume and the stats report it, and nothing shrinks it.
func TestExpansionRecordsTheSizeDurablyAndNeverShrinks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.create(t, "grow") // 1 MiB
	target := filepath.Join(f.pods, "grow")
	if err := f.publish(id, target, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.unpublish(id, target) })
	if got := f.totalBytes(t, id, target); got != 1<<20 {
		t.Fatalf("stats total %d before expansion, want the recorded 1 MiB", got)
	}
	resp, err := f.ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20}})
	if err != nil || resp.CapacityBytes != 4<<20 || !resp.NodeExpansionRequired {
		t.Fatalf("ControllerExpandVolume: %+v %v", resp, err)
	}
	f.restart(t)
	nresp, err := f.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20}})
	if err != nil || nresp.CapacityBytes != 4<<20 {
		t.Fatalf("NodeExpandVolume after a restart: %+v %v, want the recorded 4 MiB", nresp, err)
	}
	if got := f.totalBytes(t, id, target); got != 4<<20 {
		t.Fatalf("stats total %d after expansion, want 4 MiB", got)
	}
	resp, err = f.ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20}})
	if err != nil || resp.CapacityBytes != 4<<20 {
		t.Fatalf("ControllerExpandVolume to a smaller size: %+v %v, want the current 4 MiB", resp, err)
	}
	_, err = f.ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20, LimitBytes: 2 << 20}})
	expectCode(t, "an expansion whose limit is below the current size", err, codes.OutOfRange, "never shrink")
	_, err = f.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: f.pods,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1}})
	expectCode(t, "NodeExpandVolume at a path the volume is not published at", err, codes.NotFound)
}
