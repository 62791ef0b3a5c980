package replicated

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
	"github.com/cellfleet/cellfleet/internal/csi/nodereq"
)

// NodePublishVolume bind-mounts the staged FUSE mount into the target,
// read-only when asked.
func (n *Node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	d := n.d
	id, target, staging := req.GetVolumeId(), req.GetTargetPath(), req.GetStagingTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "NodePublishVolume: volume_id is required")
	case target == "":
		return nil, status.Errorf(codes.InvalidArgument, "NodePublishVolume %s: target_path is required", id)
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "NodePublishVolume %s: %v", id, err)
	}
	if staging == "" {
		return nil, status.Errorf(codes.InvalidArgument, "NodePublishVolume %s: staging_target_path is required (the driver stages volumes)", id)
	}
	for _, p := range []string{target, staging} {
		if _, _, err := d.roots.Locate(p); err != nil {
			return nil, nodereq.PathError("NodePublishVolume", id, err)
		}
	}
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	readOnly := req.GetReadonly() || mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY ||
		mode == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[id]
	if !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "NodePublishVolume %s: the volume is not staged on this node", id)
	}
	if v.StagingPath != staging {
		return nil, status.Errorf(codes.FailedPrecondition, "NodePublishVolume %s: staged at %s, not %s", id, v.StagingPath, staging)
	}
	if err := v.Published.Admit(id, target, readOnly, mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER); err != nil {
		return nil, err
	}
	if _, dead, err := mountHealth(staging); err != nil || dead {
		return nil, status.Errorf(codes.FailedPrecondition,
			"NodePublishVolume %s: staging mount at %s is not usable (owner gone: %v, err: %v)", id, staging, dead, err)
	}
	f, err := d.roots.OpenDir(target, true)
	if err != nil {
		return nil, nodereq.PathError("NodePublishVolume", id, err)
	}
	defer f.Close()
	mounted, err := mountpath.IsMountPoint(mountpath.SelfMountInfo, target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "NodePublishVolume %s: %v", id, err)
	}
	if !mounted {
		if err := mountpath.BindMount(staging, f, readOnly); err != nil {
			return nil, status.Errorf(codes.Internal, "NodePublishVolume %s: %v", id, err)
		}
	}
	return nodereq.Record(&v.Published, id, target, readOnly, d.state.Save, d.log)
}

// NodeUnpublishVolume unmounts and removes the target.
func (n *Node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	d := n.d
	id, target, err := nodereq.Unpublish(d.roots, req)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[id]
	if !ok {
		if mounted, _ := mountpath.IsMountPoint(mountpath.SelfMountInfo, target); !mounted {
			return nil, status.Errorf(codes.NotFound, "NodeUnpublishVolume: volume %s is not staged on this node", id)
		}
	}
	if err := removeTarget(d.roots, target); err != nil {
		return nil, nodereq.PathError("NodeUnpublishVolume", id, err)
	}
	if ok {
		if _, published := v.Published[target]; published {
			delete(v.Published, target)
			if err := d.state.Save(); err != nil {
				return nil, status.Errorf(codes.Internal, "NodeUnpublishVolume %s: %v", id, err)
			}
		}
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
