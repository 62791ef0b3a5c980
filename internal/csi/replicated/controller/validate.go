package controller

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ValidateVolumeCapabilities confirms the capabilities the volume's recorded
// access mode serves, and parameters CreateVolume would accept.
func (c *Controller) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "ValidateVolumeCapabilities: volume_id is required")
	case len(req.GetVolumeCapabilities()) == 0:
		return nil, status.Errorf(codes.InvalidArgument, "ValidateVolumeCapabilities %s: volume_capabilities are required", id)
	}
	var rv *volume
	if isVolumeName(id) {
		var err error
		if rv, err = c.getVolume(ctx, id); err != nil {
			return nil, err
		}
	}
	if rv == nil {
		return nil, status.Errorf(codes.NotFound, "ValidateVolumeCapabilities: volume %s does not exist", id)
	}
	for _, vc := range req.GetVolumeCapabilities() {
		if err := serves(rv.Spec.AccessMode, vc); err != nil {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
		}
	}
	if len(req.GetParameters()) > 0 {
		if _, err := parseParameters(req.GetParameters(), false); err != nil {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
		}
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}
