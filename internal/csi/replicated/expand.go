package replicated

// NodeExpandVolume: nothing on the node grows. The volume's capacity is
// replicated state: the volume controller asks the replicas for it and the
// coordinator's host commits it through Raft (docs/csi.md, "Expansion").
// The node's part is to say when the mount serves it, which statfs through
// the mount shows (the FUSE statfs reports the replicated capacity). Until
// then the answer is Unavailable, which the kubelet retries.

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeExpandVolume answers once statfs through the staged or published
// path shows at least the requested capacity.
func (n *Node) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	id, path := req.GetVolumeId(), req.GetVolumePath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "NodeExpandVolume: volume_id is required")
	case path == "":
		return nil, status.Errorf(codes.InvalidArgument, "NodeExpandVolume %s: volume_path is required", id)
	}
	if b := req.GetVolumeCapability().GetBlock(); b != nil {
		return nil, status.Errorf(codes.InvalidArgument, "NodeExpandVolume %s: block access is not supported", id)
	}
	want := req.GetCapacityRange().GetRequiredBytes()
	if want < 0 || req.GetCapacityRange().GetLimitBytes() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "NodeExpandVolume %s: negative capacity range", id)
	}
	known, atPath := n.d.knownPath(id, path)
	if !known {
		return nil, status.Errorf(codes.NotFound, "NodeExpandVolume: volume %s is not staged on this node", id)
	}
	if !atPath {
		return nil, status.Errorf(codes.NotFound, "NodeExpandVolume %s: not staged or published at %s", id, path)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, unix.ENOTCONN) {
			return nil, status.Errorf(codes.FailedPrecondition, "NodeExpandVolume %s: mount owner gone (ENOTCONN) at %s", id, path)
		}
		return nil, status.Errorf(codes.Internal, "NodeExpandVolume %s: statfs %s: %v", id, path, err)
	}
	served := int64(st.Blocks) * st.Bsize
	if served < want {
		return nil, status.Errorf(codes.Unavailable,
			"NodeExpandVolume %s: the mount serves %d bytes, %d requested; the volume's coordinator has not committed the new capacity yet, retry",
			id, served, want)
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: served}, nil
}
