package local

// Expansion, nominal: a volume is a directory of the data root's
// filesystem, with no size of its own to change (no project quotas). What
// grows is the recorded capacity, durably in the driver's state, which
// NodeExpandVolume and NodeGetVolumeStats report. Capacity never shrinks.
// In a cluster no resizer calls the controller side (external-resizer has no
// per-node mode; docs/csi.md, "Expansion"), so the volume controller records
// the expansion of its backing claims on the PV and the claim itself.

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// grow records a larger capacity for volume id and returns the capacity in
// force; a smaller or equal request changes nothing.
func (d *Driver) grow(rpc, id string, bytes int64) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[id]
	if !ok {
		return 0, status.Errorf(codes.NotFound, "%s: volume %s does not exist", rpc, id)
	}
	if bytes <= v.CapacityBytes {
		return v.CapacityBytes, nil
	}
	old := v.CapacityBytes
	v.CapacityBytes = bytes
	if err := d.state.Save(); err != nil {
		v.CapacityBytes = old
		return 0, status.Errorf(codes.Internal, "%s %s: record capacity %d: %v", rpc, id, bytes, err)
	}
	d.log.Info("volume capacity recorded", "volume", id, "from", old, "to", bytes)
	return bytes, nil
}

// ControllerExpandVolume records the larger capacity.
func (c *Controller) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "ControllerExpandVolume: volume_id is required")
	case req.GetCapacityRange() == nil:
		return nil, status.Errorf(codes.InvalidArgument, "ControllerExpandVolume %s: capacity_range is required", id)
	}
	if vc := req.GetVolumeCapability(); vc != nil {
		if err := checkCapability(vc); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "ControllerExpandVolume %s: %v", id, err)
		}
	}
	bytes, err := requestedBytes(req.GetCapacityRange())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "ControllerExpandVolume %s: %v", id, err)
	}
	got, err := c.d.grow("ControllerExpandVolume", id, bytes)
	if err != nil {
		return nil, err
	}
	if lim := req.GetCapacityRange().GetLimitBytes(); lim > 0 && got > lim {
		return nil, status.Errorf(codes.OutOfRange,
			"ControllerExpandVolume %s: capacity is already %d bytes, above limit_bytes %d; volumes never shrink", id, got, lim)
	}
	// The node side reports the new size to the kubelet (nominal: nothing
	// on the node changes).
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: got, NodeExpansionRequired: true}, nil
}

// NodeExpandVolume reports the recorded capacity of a published volume,
// recording the request first if it is larger (the node holds the same
// state as the controller side).
func (n *Node) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	d := n.d
	id, path := req.GetVolumeId(), req.GetVolumePath()
	if err := d.checkPublished("NodeExpandVolume", id, path); err != nil {
		return nil, err
	}
	if vc := req.GetVolumeCapability(); vc != nil {
		if err := checkCapability(vc); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "NodeExpandVolume %s: %v", id, err)
		}
	}
	bytes, err := requestedBytes(req.GetCapacityRange())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "NodeExpandVolume %s: %v", id, err)
	}
	got, err := d.grow("NodeExpandVolume", id, bytes)
	if err != nil {
		return nil, err
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: got}, nil
}

// recordedCapacity is a volume's recorded capacity, 0 if unknown.
func (d *Driver) recordedCapacity(id string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.state.Volumes[id]; ok {
		return v.CapacityBytes
	}
	return 0
}
