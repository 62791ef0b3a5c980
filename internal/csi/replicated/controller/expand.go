package controller

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ControllerExpandVolume grows the volume's recorded capacity.
//
// Only spec.capacity changes here, and only upwards (the API's CEL rule
// refuses shrinking too); the volume controller grows the filesystem's
// capacity through Raft and expands the backing claims, and the node side
// (NodeExpandVolume) makes the mount report it, hence
// node_expansion_required. The backing class must allow expansion, or the
// claims could never follow. The growth is checked against the backing
// class's limit like a new volume of the difference: each of R nodes must
// publish that much more room (which R nodes hold the replicas is the
// volume controller's record, so this is necessary, not sufficient).
func (c *Controller) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "ControllerExpandVolume: volume_id is required")
	case req.GetCapacityRange() == nil:
		return nil, status.Errorf(codes.InvalidArgument, "ControllerExpandVolume %s: capacity_range is required", id)
	}
	bytes, err := requestedBytes(req.GetCapacityRange())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "ControllerExpandVolume %s: %v", id, err)
	}
	if vc := req.GetVolumeCapability(); vc != nil {
		if err := checkCapability(vc); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "ControllerExpandVolume %s: %v", id, err)
		}
	}
	var rv *volume
	if isVolumeName(id) {
		if rv, err = c.getVolume(ctx, id); err != nil {
			return nil, err
		}
	}
	if rv == nil {
		return nil, status.Errorf(codes.NotFound, "ControllerExpandVolume: volume %s does not exist", id)
	}
	if rv.DeletionTimestamp != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "ControllerExpandVolume %s: the volume is being deleted", id)
	}
	have := rv.Spec.Capacity.Value()
	if lim := req.GetCapacityRange().GetLimitBytes(); lim > 0 && have > lim {
		return nil, status.Errorf(codes.OutOfRange,
			"ControllerExpandVolume %s: capacity is already %d bytes, above limit_bytes %d; volumes never shrink", id, have, lim)
	}
	if bytes <= have {
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: have, NodeExpansionRequired: true}, nil
	}
	rpc := "ControllerExpandVolume " + id
	sc, err := c.backingClass(ctx, rpc, rv.Spec.BackingStorageClassName)
	if err != nil {
		return nil, err
	}
	if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		return nil, status.Errorf(codes.FailedPrecondition,
			"%s: backing StorageClass %s does not allow volume expansion, so the backing claims cannot grow", rpc, sc.Name)
	}
	if err := c.checkLimit(ctx, rpc, sc.Name, rv.Spec.Replicas, bytes-have); err != nil {
		return nil, err
	}
	if err := c.updateCapacity(ctx, rpc, rv, bytes); err != nil {
		return nil, err
	}
	c.log.Info("csi controller: volume capacity grown", "volume", id, "from", have, "to", bytes)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: bytes, NodeExpansionRequired: true}, nil
}

// conflictRetries bounds how often a capacity update is retried because
// only the volume's status moved underneath it.
const conflictRetries = 5

// updateCapacity writes the grown capacity, bound to the resourceVersion
// read. The volume controller writes the status often, and every status
// write moves the resourceVersion, so a conflict whose fresh read shows the
// same spec is retried at once on the fresh object; a conflict with a
// changed spec (another expansion, a deletion) is the caller's to retry.
func (c *Controller) updateCapacity(ctx context.Context, rpc string, rv *volume, bytes int64) error {
	have := rv.Spec.Capacity.Value()
	for attempt := 1; ; attempt++ {
		rv.Spec.Capacity = *resource.NewQuantity(bytes, resource.BinarySI)
		err := c.client.Update(ctx, rv)
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			return capacityUpdateError(rpc, bytes, err)
		}
		fresh, gerr := c.getVolume(ctx, rv.Name)
		switch {
		case gerr != nil:
			return gerr
		case fresh == nil:
			return status.Errorf(codes.NotFound, "%s: the volume was deleted", rpc)
		case fresh.DeletionTimestamp != nil || fresh.Spec.Capacity.Value() != have:
			return status.Errorf(codes.Aborted, "%s: the volume changed while growing it; retry", rpc)
		}
		rv = fresh
	}
}

// capacityUpdateError maps the API's answer to a capacity update to CSI.
func capacityUpdateError(rpc string, bytes int64, err error) error {
	switch {
	case apierrors.IsConflict(err):
		return status.Errorf(codes.Aborted, "%s: the volume changed while growing it; retry", rpc)
	case apierrors.IsNotFound(err):
		return status.Errorf(codes.NotFound, "%s: the volume was deleted", rpc)
	case apierrors.IsInvalid(err):
		return status.Errorf(codes.InvalidArgument, "%s: the API refused capacity %d: %v", rpc, bytes, err)
	case err != nil:
		return status.Errorf(codes.Unavailable, "%s: update capacity: %v", rpc, err)
	}
	return nil
}
