package local

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Controller is the local driver's Controller service. It runs on every node
// and provisions only for its own node.
type Controller struct {
	csi.UnimplementedControllerServer
	d *Driver
}

// Controller returns the driver's Controller service.
func (d *Driver) Controller() *Controller { return &Controller{d: d} }

// ControllerGetCapabilities lists create/delete, capacity, listing and
// (nominal) expansion.
func (c *Controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// reachable reports whether the requested topology includes this node.
// Without requisite topology any node may be chosen, so this one is fine.
func (d *Driver) reachable(req *csi.TopologyRequirement) bool {
	if req == nil || len(req.GetRequisite()) == 0 {
		return true
	}
	for _, t := range req.GetRequisite() {
		if t.GetSegments()[TopologyKey] == d.opts.NodeID {
			return true
		}
	}
	return false
}

// requestedBytes picks the size to record from a capacity range.
func requestedBytes(r *csi.CapacityRange) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || lim < 0 {
		return 0, fmt.Errorf("capacity range must not be negative")
	}
	if lim > 0 && req > lim {
		return 0, fmt.Errorf("required_bytes %d exceeds limit_bytes %d", req, lim)
	}
	if req == 0 {
		return lim, nil
	}
	return req, nil
}

// CreateVolume creates the volume's directory on this node.
func (c *Controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	d := c.d
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "CreateVolume: name is required")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume %s: %v", req.GetName(), err)
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume %s: content sources are not supported", req.GetName())
	}
	size, err := requestedBytes(req.GetCapacityRange())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume %s: %v", req.GetName(), err)
	}
	if !d.reachable(req.GetAccessibilityRequirements()) {
		return nil, status.Errorf(codes.ResourceExhausted,
			"CreateVolume %s: this plugin provisions only for %s=%s, which the requisite topology excludes",
			req.GetName(), TopologyKey, d.opts.NodeID)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if v := volumeByName(d.state, req.GetName()); v != nil {
		if lim := req.GetCapacityRange().GetLimitBytes(); v.CapacityBytes < req.GetCapacityRange().GetRequiredBytes() ||
			(lim > 0 && v.CapacityBytes > lim) {
			return nil, status.Errorf(codes.AlreadyExists,
				"CreateVolume %s: volume %s exists with capacity %d, incompatible with the request", req.GetName(), v.ID, v.CapacityBytes)
		}
		return &csi.CreateVolumeResponse{Volume: d.csiVolume(v)}, nil
	}
	fs, err := statfs(d.opts.DataRoot)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "CreateVolume %s: %v", req.GetName(), err)
	}
	if size > fs.availableBytes {
		return nil, status.Errorf(codes.OutOfRange,
			"CreateVolume %s: %d bytes requested, %d available under %s", req.GetName(), size, fs.availableBytes, d.opts.DataRoot)
	}
	v := &volume{ID: volumeID(req.GetName()), Name: req.GetName(), CapacityBytes: size}
	if err := os.Mkdir(d.volumeDir(v.ID), 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, status.Errorf(codes.Internal, "CreateVolume %s: %v", req.GetName(), err)
	}
	d.state.Volumes[v.ID] = v
	if err := d.state.Save(); err != nil {
		delete(d.state.Volumes, v.ID)
		return nil, status.Errorf(codes.Internal, "CreateVolume %s: %v", req.GetName(), err)
	}
	d.log.Info("local: volume created", "volume", v.ID, "name", v.Name, "bytes", size)
	return &csi.CreateVolumeResponse{Volume: d.csiVolume(v)}, nil
}

func (d *Driver) csiVolume(v *volume) *csi.Volume {
	return &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.CapacityBytes,
		AccessibleTopology: []*csi.Topology{{Segments: d.topology()}},
	}
}

// DeleteVolume removes the directory, refusing while the volume is published.
func (c *Controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	d := c.d
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "DeleteVolume: volume_id is required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if rec, ok := d.pubs.Get(id); ok {
		return nil, status.Errorf(codes.FailedPrecondition,
			"DeleteVolume %s: exclusively published by %s; unpublish it first", id, rec)
	}
	v, ok := d.state.Volumes[id]
	if !ok {
		return &csi.DeleteVolumeResponse{}, nil // already gone: idempotent
	}
	if len(v.Published) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition,
			"DeleteVolume %s: still published at %v; unpublish it first", id, keys(v.Published))
	}
	if err := os.RemoveAll(d.volumeDir(id)); err != nil {
		return nil, status.Errorf(codes.Internal, "DeleteVolume %s: %v", id, err)
	}
	delete(d.state.Volumes, id)
	if err := d.state.Save(); err != nil {
		return nil, status.Errorf(codes.Internal, "DeleteVolume %s: %v", id, err)
	}
	d.log.Info("local: volume deleted", "volume", id)
	return &csi.DeleteVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms what checkCapability accepts.
func (c *Controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	d := c.d
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "ValidateVolumeCapabilities: volume_id is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "ValidateVolumeCapabilities: volume_capabilities are required")
	}
	d.mu.Lock()
	_, ok := d.state.Volumes[req.GetVolumeId()]
	d.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "ValidateVolumeCapabilities: volume %s does not exist", req.GetVolumeId())
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}

// GetCapacity reports the data root's free space for this node's topology.
func (c *Controller) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	d := c.d
	if seg := req.GetAccessibleTopology().GetSegments(); len(seg) > 0 && seg[TopologyKey] != d.opts.NodeID {
		return &csi.GetCapacityResponse{AvailableCapacity: 0}, nil
	}
	fs, err := statfs(d.opts.DataRoot)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "GetCapacity: %v", err)
	}
	return &csi.GetCapacityResponse{AvailableCapacity: fs.availableBytes}, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
