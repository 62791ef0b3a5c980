package controller_test

import (
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// readyVolume creates a Ready volume of bytes on class through the
// controller (the test plays the volume controller's status).
func readyVolume(t *testing.T, h *harness, class string, bytes int64) string {
	t.Helper()
	name := unique("pvc")
	cleanupVolume(t, name)
	_, _ = h.ctrl.CreateVolume(testContext(t), createRequest(name, class, bytes))
	standInVolumeController(t, name, true)
	if _, err := h.ctrl.CreateVolume(testContext(t), createRequest(name, class, bytes)); err != nil {
		t.Fatalf("CreateVolume of a Ready volume: %v", err)
	}
	return name
}

func TestControllerExpandVolumeGrowsTheRecordedCapacity(t *testing.T) {
	h := serve(t, 300*time.Millisecond)
	class := backingClass(t, true)
	publishCapacity(t, class, 20*gi, 20*gi, 6*gi)
	id := readyVolume(t, h, class, 2*gi)

	resp, err := h.ctrl.ControllerExpandVolume(testContext(t), &csi.ControllerExpandVolumeRequest{
		VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 5 * gi}})
	if err != nil || resp.GetCapacityBytes() != 5*gi || !resp.GetNodeExpansionRequired() {
		t.Fatalf("expanding to 5 GiB must answer 5 GiB with node expansion required, got %v (%v)", resp, err)
	}
	if got := getVolume(t, id).Spec.Capacity.Value(); got != 5*gi {
		t.Fatalf("expansion must record spec.capacity 5 GiB for the volume controller, got %d", got)
	}
	resp, err = h.ctrl.ControllerExpandVolume(testContext(t), &csi.ControllerExpandVolumeRequest{
		VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 3 * gi}})
	if err != nil || resp.GetCapacityBytes() != 5*gi {
		t.Fatalf("a request below the capacity must answer the current 5 GiB and shrink nothing, got %v (%v)", resp, err)
	}
	if got := getVolume(t, id).Spec.Capacity.Value(); got != 5*gi {
		t.Fatalf("a smaller request must leave spec.capacity at 5 GiB, got %d", got)
	}
	// Growing by 7 GiB needs 7 GiB more on three nodes; the third has 6.
	_, err = h.ctrl.ControllerExpandVolume(testContext(t), &csi.ControllerExpandVolumeRequest{
		VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 12 * gi}})
	expectCode(t, "expansion past the backing class's limit", err, codes.OutOfRange, "capacity 7516192768 bytes", "limit of 6442450944 bytes")
	_, err = h.ctrl.ControllerExpandVolume(testContext(t), &csi.ControllerExpandVolumeRequest{
		VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 6 * gi, LimitBytes: 4 * gi}})
	expectCode(t, "expansion with a limit below the request", err, codes.InvalidArgument, "exceeds limit_bytes")
	_, err = h.ctrl.ControllerExpandVolume(testContext(t), &csi.ControllerExpandVolumeRequest{
		VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 * gi, LimitBytes: 4 * gi}})
	expectCode(t, "a limit below the current capacity", err, codes.OutOfRange, "already 5368709120 bytes", "never shrink")
}

func TestControllerExpandVolumeRefusesBadRequests(t *testing.T) {
	h := serve(t, 300*time.Millisecond)
	fixed := backingClass(t, false)
	id := readyVolume(t, h, fixed, gi)
	cases := []struct {
		what      string
		req       *csi.ControllerExpandVolumeRequest
		code      codes.Code
		fragments []string
	}{
		{"no volume ID", &csi.ControllerExpandVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: gi}},
			codes.InvalidArgument, []string{"volume_id is required"}},
		{"no capacity range", &csi.ControllerExpandVolumeRequest{VolumeId: id}, codes.InvalidArgument, []string{"capacity_range is required"}},
		{"an unknown volume", &csi.ControllerExpandVolumeRequest{VolumeId: "pvc-nowhere", CapacityRange: &csi.CapacityRange{RequiredBytes: gi}},
			codes.NotFound, []string{"pvc-nowhere does not exist"}},
		{"a backing class that cannot expand", &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gi}},
			codes.FailedPrecondition, []string{fixed, "does not allow volume expansion"}},
		{"a block capability", &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gi},
			VolumeCapability: &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}},
			codes.InvalidArgument, []string{"block access"}},
	}
	for _, tc := range cases {
		_, err := h.ctrl.ControllerExpandVolume(testContext(t), tc.req)
		expectCode(t, "ControllerExpandVolume with "+tc.what, err, tc.code, tc.fragments...)
	}
	if got := getVolume(t, id).Spec.Capacity.Value(); got != gi {
		t.Fatalf("refused expansions must leave spec.capacity at 1 GiB, got %d", got)
	}
}
