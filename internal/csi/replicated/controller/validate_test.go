package controller_test

import (
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func TestValidateVolumeCapabilitiesConfirmsWhatTheRecordedAccessModeServes(t *testing.T) {
	h := serve(t, 300*time.Millisecond)
	class := backingClass(t, true)
	rwo := readyVolume(t, h, class, gi)
	rwop := unique("pvc")
	cleanupVolume(t, rwop)
	req := createRequest(rwop, class, gi)
	req.VolumeCapabilities = []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)}
	_, _ = h.ctrl.CreateVolume(testContext(t), req)

	cases := []struct {
		volume    string
		mode      csi.VolumeCapability_AccessMode_Mode
		confirmed bool
		message   string
	}{
		{rwo, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, true, ""},
		{rwo, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, true, ""},
		{rwo, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, true, ""},
		{rwo, csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, true, ""},
		{rwo, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, false, "MULTI_NODE_MULTI_WRITER is not supported"},
		{rwop, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, true, ""},
		{rwop, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false, "not served by a ReadWriteOncePod volume"},
	}
	for _, tc := range cases {
		resp, err := h.ctrl.ValidateVolumeCapabilities(testContext(t), &csi.ValidateVolumeCapabilitiesRequest{
			VolumeId: tc.volume, VolumeCapabilities: []*csi.VolumeCapability{mountCap(tc.mode)}})
		if err != nil {
			t.Fatalf("ValidateVolumeCapabilities(%s, %s): %v", tc.volume, tc.mode, err)
		}
		if got := resp.GetConfirmed() != nil; got != tc.confirmed || !strings.Contains(resp.GetMessage(), tc.message) {
			t.Fatalf("ValidateVolumeCapabilities(%s, %s) must confirm=%v with message %q, got %v", tc.volume, tc.mode, tc.confirmed, tc.message, resp)
		}
	}
	_, err := h.ctrl.ValidateVolumeCapabilities(testContext(t), &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId: "pvc-nowhere", VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}})
	expectCode(t, "ValidateVolumeCapabilities of an unknown volume", err, codes.NotFound, "pvc-nowhere")
	_, err = h.ctrl.ValidateVolumeCapabilities(testContext(t), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: rwo})
	expectCode(t, "ValidateVolumeCapabilities without capabilities", err, codes.InvalidArgument, "volume_capabilities are required")
}
