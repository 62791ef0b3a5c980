package replicated

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/nodereq"
)

// HealthReason is the CamelCase reason of a volume health entry.
type HealthReason string

const (
	// ReasonOwnerGone: the staging mount answers ENOTCONN; its FUSE owner
	// died. Unstage and stage again to recover: open descriptors are not
	// recovered (docs/csi.md, "The replicated driver's node side").
	ReasonOwnerGone HealthReason = "MountOwnerGone"
	// ReasonNotMounted: the volume is recorded as staged but nothing is
	// mounted at its staging path.
	ReasonNotMounted HealthReason = "StagingNotMounted"
)

// knownPath reports whether id is staged here and whether path is its
// staging path or one of its publications.
func (d *Driver) knownPath(id, path string) (bool, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[id]
	if !ok {
		return false, false
	}
	_, published := v.Published[path]
	return true, path == v.StagingPath || published
}

// statStaged is statfs of a path volume id is staged or published at;
// rpc names the call in errors.
func (n *Node) statStaged(rpc, id, path string) (unix.Statfs_t, error) {
	var st unix.Statfs_t
	if id == "" {
		return st, status.Errorf(codes.InvalidArgument, "%s: volume_id is required", rpc)
	}
	if path == "" {
		return st, status.Errorf(codes.InvalidArgument, "%s %s: volume_path is required", rpc, id)
	}
	known, atPath := n.d.knownPath(id, path)
	if !known {
		return st, status.Errorf(codes.NotFound, "%s: volume %s is not staged on this node", rpc, id)
	}
	if !atPath {
		return st, status.Errorf(codes.NotFound, "%s %s: not staged or published at %s", rpc, id, path)
	}
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, unix.ENOTCONN) {
			return st, status.Errorf(codes.FailedPrecondition, "%s %s: mount owner gone (ENOTCONN) at %s", rpc, id, path)
		}
		return st, status.Errorf(codes.Internal, "%s %s: statfs %s: %v", rpc, id, path, err)
	}
	return st, nil
}

// NodeGetVolumeStats reports statfs of the staged or published path.
func (n *Node) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	st, err := n.statStaged("NodeGetVolumeStats", req.GetVolumeId(), req.GetVolumePath())
	if err != nil {
		return nil, err
	}
	bs := st.Bsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs, Used: int64(st.Blocks-st.Bfree) * bs},
		{Unit: csi.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
	}}, nil
}

// NodeGetVolumeHealth is this spec version's volume condition: the staging
// mount is INACCESSIBLE when its owner died (ENOTCONN) or it is missing.
func (n *Node) NodeGetVolumeHealth(_ context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	d := n.d
	id, err := nodereq.HealthID(req)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	v, ok := d.state.Volumes[id]
	var staging string
	if ok {
		staging = v.StagingPath
	}
	d.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "NodeGetVolumeHealth: volume %s is not staged on this node", id)
	}
	h := &csi.VolumeHealth{VolumeId: id}
	entry := func(r HealthReason, msg string) {
		h.HealthStatuses = append(h.HealthStatuses, nodereq.Inaccessible(string(r), msg))
	}
	mounted, dead, err := mountHealth(staging)
	switch {
	case err != nil:
		return nil, status.Errorf(codes.Internal, "NodeGetVolumeHealth %s: %v", id, err)
	case dead:
		entry(ReasonOwnerGone, "the FUSE mount at "+staging+" answers ENOTCONN: its mount owner is gone; unstage and stage again")
	case !mounted:
		entry(ReasonNotMounted, "nothing is mounted at the staging path "+staging)
	}
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: h}, nil
}
