package replicated

// NodeExpandVolume: nothing on the node grows. The volume's capacity is
// replicated state: the volume controller asks the replicas for it and the
// coordinator's host commits it through Raft (docs/csi.md, "Expansion").
// The node's part is to say when the mount serves it, which statfs through
// the mount shows (the FUSE statfs reports the replicated capacity). Until
// then the answer is Unavailable, which the kubelet retries.

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeExpandVolume answers once statfs through the staged or published
// path shows at least the requested capacity.
func (n *Node) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	id, path := req.GetVolumeId(), req.GetVolumePath()
	if b := req.GetVolumeCapability().GetBlock(); b != nil {
		return nil, status.Errorf(codes.InvalidArgument, "NodeExpandVolume %s: block access is not supported", id)
	}
	want := req.GetCapacityRange().GetRequiredBytes()
	if want < 0 || req.GetCapacityRange().GetLimitBytes() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "NodeExpandVolume %s: negative capacity range", id)
	}
	st, err := n.statStaged("NodeExpandVolume", id, path)
	if err != nil {
		return nil, err
	}
	served := int64(st.Blocks) * st.Bsize
	if served < want {
		return nil, status.Errorf(codes.Unavailable,
			"NodeExpandVolume %s: the mount serves %d bytes, %d requested; the volume's coordinator has not committed the new capacity yet, retry",
			id, served, want)
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: served}, nil
}
