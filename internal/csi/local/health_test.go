package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/cellfleet/cellfleet/internal/csi/local"
)

func TestVolumeHealthIsInaccessibleWhenTheDirectoryIsMissingOrUnreadable(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name       string
		break_     func(dir string) error
		wantReason local.HealthReason
	}{
		{name: "healthy directory", break_: func(string) error { return nil }},
		{name: "directory removed", break_: os.RemoveAll, wantReason: local.ReasonDirectoryMissing},
		{name: "directory replaced by a file", break_: func(dir string) error {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			return os.WriteFile(dir, []byte("x"), 0o600)
		}, wantReason: local.ReasonDirectoryUnreadable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := f.create(t, "health-"+tc.name)
			if err := tc.break_(filepath.Join(f.base, "data", id)); err != nil {
				t.Fatal(err)
			}
			resp, err := f.node.NodeGetVolumeHealth(context.Background(), &csi.NodeGetVolumeHealthRequest{VolumeId: id})
			if err != nil {
				t.Fatalf("NodeGetVolumeHealth: %v", err)
			}
			entries := resp.GetVolumeHealth().GetHealthStatuses()
			if tc.wantReason == "" {
				if len(entries) != 0 {
					t.Fatalf("a present, readable directory must report no health issue, got %v", entries)
				}
				return
			}
			if len(entries) != 1 || entries[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE ||
				entries[0].GetReason() != string(tc.wantReason) {
				t.Fatalf("volume must be reported INACCESSIBLE with reason %s, got %v", tc.wantReason, entries)
			}
		})
	}
}

func TestStatsReportUsageOfThePublishedPath(t *testing.T) {
	f := newFixture(t)
	id := f.create(t, "stats")
	target := filepath.Join(f.pods, "stats")
	if err := f.publish(id, target, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.unpublish(id, target) })
	resp, err := f.node.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
	if err != nil {
		t.Fatalf("NodeGetVolumeStats: %v", err)
	}
	if len(resp.GetUsage()) != 2 || resp.GetUsage()[0].GetTotal() <= 0 || resp.GetUsage()[1].GetTotal() <= 0 {
		t.Fatalf("stats must report byte and inode usage, got %v", resp.GetUsage())
	}
	_, err = f.node.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: f.pods})
	expectCode(t, "stats of a path the volume is not published at", err, codes.NotFound)
}

func TestControllerProvisionsOnlyForItsOwnNode(t *testing.T) {
	f := newFixture(t)
	other := &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{local.TopologyKey: "node-b"}}}}
	_, err := f.ctrl.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: "elsewhere", VolumeCapabilities: []*csi.VolumeCapability{mountCap()}, AccessibilityRequirements: other,
	})
	expectCode(t, "CreateVolume for another node's topology", err, codes.ResourceExhausted, local.TopologyKey, "node-a")

	own := &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{local.TopologyKey: "node-a"}}}}
	resp, err := f.ctrl.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: "here", VolumeCapabilities: []*csi.VolumeCapability{mountCap()}, AccessibilityRequirements: own,
	})
	if err != nil {
		t.Fatalf("CreateVolume for this node's topology: %v", err)
	}
	if got := resp.GetVolume().GetAccessibleTopology()[0].GetSegments()[local.TopologyKey]; got != "node-a" {
		t.Fatalf("a volume must be accessible from its own node only, got topology %q", got)
	}
	capOther, err := f.ctrl.GetCapacity(context.Background(), &csi.GetCapacityRequest{AccessibleTopology: other.Requisite[0]})
	if err != nil || capOther.GetAvailableCapacity() != 0 {
		t.Fatalf("capacity for another node's topology must be 0, got %v (%v)", capOther.GetAvailableCapacity(), err)
	}
	capOwn, err := f.ctrl.GetCapacity(context.Background(), &csi.GetCapacityRequest{AccessibleTopology: own.Requisite[0]})
	if err != nil || capOwn.GetAvailableCapacity() <= 0 {
		t.Fatalf("capacity for this node must be the data root's free space, got %v (%v)", capOwn.GetAvailableCapacity(), err)
	}
	_, err = f.ctrl.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: "huge", VolumeCapabilities: []*csi.VolumeCapability{mountCap()},
		CapacityRange: &csi.CapacityRange{RequiredBytes: capOwn.GetAvailableCapacity() * 2},
	})
	expectCode(t, "CreateVolume larger than the free space", err, codes.OutOfRange)
}
