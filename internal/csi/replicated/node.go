package replicated

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
	"github.com/cellfleet/cellfleet/internal/csi/nodereq"
)

// Node is the replicated driver's Node service.
type Node struct {
	csi.UnimplementedNodeServer
	d *Driver
}

// Node returns the driver's Node service.
func (d *Driver) Node() *Node { return &Node{d: d} }

// maxVolumeID bounds volume IDs passed on to the mount owner.
const maxVolumeID = 128

// NodeGetInfo names the node; replicated volumes are reachable from any node.
func (n *Node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.d.opts.NodeID}, nil
}

// NodeGetCapabilities lists staging, stats, health and multi-writer.
func (n *Node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// singleNodeModes let only one node write: the owner may cache.
var singleNodeModes = map[csi.VolumeCapability_AccessMode_Mode]bool{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER:        true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:   true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER: true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:  true,
}

func checkCapability(c *csi.VolumeCapability) error {
	switch {
	case c == nil:
		return errors.New("volume_capability is required")
	case c.GetBlock() != nil:
		return errors.New("block access is not supported: the volume is a filesystem")
	case c.GetMount() == nil:
		return errors.New("access type must be mount")
	case c.GetMount().GetFsType() != "":
		return fmt.Errorf("fs_type %q is not supported: the filesystem is the replicated FUSE filesystem", c.GetMount().GetFsType())
	case c.GetAccessMode() == nil || c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_UNKNOWN:
		return errors.New("access mode is required")
	}
	return nil
}

// ownerError maps a mount-owner failure to a CSI code.
func ownerError(rpc, id string, err error) error {
	var oe *OwnerError
	switch {
	case errors.As(err, &oe) && oe.Code == CodeInvalidArgument:
		return status.Errorf(codes.InvalidArgument, "%s %s: %v", rpc, id, err)
	case errors.As(err, &oe) && oe.Code == CodeConflict:
		return status.Errorf(codes.FailedPrecondition, "%s %s: %v", rpc, id, err)
	case errors.As(err, &oe) && oe.Code == CodeUnauthorized:
		return status.Errorf(codes.PermissionDenied, "%s %s: %v", rpc, id, err)
	case errors.As(err, &oe) && oe.Code == CodeUnavailable, errors.Is(err, ErrOwnerUnreachable):
		return status.Errorf(codes.Unavailable, "%s %s: %v", rpc, id, err)
	}
	return status.Errorf(codes.Internal, "%s %s: %v", rpc, id, err)
}

// mountHealth says whether path is a mount point and whether it answers:
// a FUSE mount whose owner died stays in the table but fails with ENOTCONN.
func mountHealth(path string) (mounted bool, dead bool, err error) {
	mounted, err = mountpath.IsMountPoint(mountpath.SelfMountInfo, path)
	if err != nil || !mounted {
		return mounted, false, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); errors.Is(err, unix.ENOTCONN) {
		return true, true, nil
	}
	return true, false, nil
}

// NodeStageVolume asks the mount owner for the volume's FUSE session at
// the staging path.
func (n *Node) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	d := n.d
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "NodeStageVolume: volume_id is required")
	case len(id) > maxVolumeID:
		return nil, status.Errorf(codes.InvalidArgument, "NodeStageVolume: volume_id longer than %d bytes", maxVolumeID)
	case staging == "":
		return nil, status.Errorf(codes.InvalidArgument, "NodeStageVolume %s: staging_target_path is required", id)
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "NodeStageVolume %s: %v", id, err)
	}
	f, err := d.roots.OpenDir(staging, true)
	if err != nil {
		return nil, nodereq.PathError("NodeStageVolume", id, err)
	}
	f.Close()
	readOnly := req.GetVolumeCapability().GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY ||
		req.GetVolumeCapability().GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.state.Volumes[id]; ok && v.StagingPath != staging {
		return nil, status.Errorf(codes.FailedPrecondition,
			"NodeStageVolume %s: already staged at %s", id, v.StagingPath)
	}
	mounted, dead, err := mountHealth(staging)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "NodeStageVolume %s: %v", id, err)
	}
	if dead {
		return nil, status.Errorf(codes.FailedPrecondition,
			"NodeStageVolume %s: %s holds a FUSE mount whose owner is gone (ENOTCONN); unstage it first", id, staging)
	}
	if !mounted {
		mode := req.GetVolumeCapability().GetAccessMode().GetMode()
		opts := MountOptions{ReadOnly: readOnly, SingleWriter: singleNodeModes[mode],
			VolumeContext: req.GetVolumeContext(), Secrets: req.GetSecrets()}
		if err := d.owner.Mount(ctx, id, staging, opts); err != nil {
			return nil, ownerError("NodeStageVolume", id, err)
		}
		if ok, err := mountpath.IsMountPoint(mountpath.SelfMountInfo, staging); err != nil || !ok {
			return nil, status.Errorf(codes.Internal,
				"NodeStageVolume %s: the mount owner answered but nothing is mounted at %s (%v)", id, staging, err)
		}
	}
	if _, ok := d.state.Volumes[id]; !ok {
		d.state.Volumes[id] = &volume{ID: id, StagingPath: staging, ReadOnly: readOnly}
		if err := d.state.Save(); err != nil {
			return nil, status.Errorf(codes.Internal, "NodeStageVolume %s: %v", id, err)
		}
	}
	d.log.Info("replicated: volume staged", "volume", id, "staging", staging)
	return &csi.NodeStageVolumeResponse{}, nil
}

// NodeUnstageVolume ends the FUSE session; a session whose owner died is
// detached here, since no owner is left to end it.
func (n *Node) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	d := n.d
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "NodeUnstageVolume: volume_id is required")
	}
	if staging == "" {
		return nil, status.Errorf(codes.InvalidArgument, "NodeUnstageVolume %s: staging_target_path is required", id)
	}
	if _, _, err := d.roots.Locate(staging); err != nil {
		return nil, nodereq.PathError("NodeUnstageVolume", id, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.state.Volumes[id]; ok && len(v.Published) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition,
			"NodeUnstageVolume %s: still published at %v", id, keys(v.Published))
	}
	mounted, dead, err := mountHealth(staging)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "NodeUnstageVolume %s: %v", id, err)
	}
	switch {
	case dead:
		d.log.Warn("replicated: detaching a mount whose owner is gone", "volume", id, "staging", staging)
		if err := mountpath.Unmount(staging, true); err != nil {
			return nil, status.Errorf(codes.Internal, "NodeUnstageVolume %s: %v", id, err)
		}
	case mounted:
		if err := d.owner.Unmount(ctx, id, staging); err != nil {
			return nil, ownerError("NodeUnstageVolume", id, err)
		}
	}
	if _, ok := d.state.Volumes[id]; ok {
		delete(d.state.Volumes, id)
		if err := d.state.Save(); err != nil {
			return nil, status.Errorf(codes.Internal, "NodeUnstageVolume %s: %v", id, err)
		}
	}
	d.log.Info("replicated: volume unstaged", "volume", id, "staging", staging)
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// removeTarget unmounts a publication target if mounted and removes it.
func removeTarget(roots mountpath.Roots, target string) error {
	if err := roots.Check(target); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		// A bind of a dead FUSE mount cannot be opened; it is still ours
		// to detach if the table lists it.
		if mounted, merr := mountpath.IsMountPoint(mountpath.SelfMountInfo, target); merr != nil || !mounted {
			return err
		}
	}
	mounted, dead, err := mountHealth(target)
	if err != nil {
		return err
	}
	if mounted {
		if err := mountpath.Unmount(target, dead); err != nil {
			return err
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove target %s: %w", target, err)
	}
	return nil
}
