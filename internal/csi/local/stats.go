package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/nodereq"
)

// HealthReason is the CamelCase reason of a volume health entry.
type HealthReason string

const (
	// ReasonDirectoryMissing: the volume's directory under the data root is gone.
	ReasonDirectoryMissing HealthReason = "VolumeDirectoryMissing"
	// ReasonDirectoryUnreadable: the directory exists but cannot be listed.
	ReasonDirectoryUnreadable HealthReason = "VolumeDirectoryUnreadable"
)

// NodeGetVolumeStats reports usage of the published path. Without project
// quotas the figures are those of the data root's filesystem (docs/csi.md),
// except the total, which is the recorded capacity when the root is larger.
func (n *Node) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	d := n.d
	id, path := req.GetVolumeId(), req.GetVolumePath()
	if err := d.checkPublished("NodeGetVolumeStats", id, path); err != nil {
		return nil, err
	}
	fs, err := statfs(path)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "NodeGetVolumeStats %s: %v", id, err)
	}
	// The recorded (nominal) capacity is the volume's size when the data
	// root holds that much: what expansion grew shows here.
	if nominal := d.recordedCapacity(id); nominal > 0 && nominal < fs.totalBytes {
		fs.totalBytes, fs.availableBytes = nominal, min(fs.availableBytes, nominal)
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: fs.totalBytes, Available: fs.availableBytes, Used: fs.usedBytes},
		{Unit: csi.VolumeUsage_INODES, Total: fs.totalInodes, Available: fs.freeInodes, Used: fs.usedInodes},
	}}, nil
}

// NodeGetVolumeHealth is this spec version's volume condition: an
// INACCESSIBLE entry when the volume's directory is missing or unreadable,
// no entry when it is healthy.
func (n *Node) NodeGetVolumeHealth(_ context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	d := n.d
	id, err := nodereq.HealthID(req)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	_, ok := d.state.Volumes[id]
	d.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "NodeGetVolumeHealth: volume %s does not exist", id)
	}
	h := &csi.VolumeHealth{VolumeId: id}
	if reason, msg := d.condition(id); reason != "" {
		h.HealthStatuses = []*csi.VolumeHealth_VolumeHealthEntry{nodereq.Inaccessible(string(reason), msg)}
	}
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: h}, nil
}

// condition checks the volume directory exists and can be listed; an empty
// reason means healthy.
func (d *Driver) condition(id string) (HealthReason, string) {
	dir := d.volumeDir(id)
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return ReasonDirectoryMissing, fmt.Sprintf("volume directory %s is missing", dir)
	}
	if err != nil {
		return ReasonDirectoryUnreadable, fmt.Sprintf("volume directory %s: %v", dir, err)
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != nil && !errors.Is(err, io.EOF) {
		return ReasonDirectoryUnreadable, fmt.Sprintf("volume directory %s is unreadable: %v", dir, err)
	}
	return "", ""
}

func hasKey(m map[string]bool, k string) bool { _, ok := m[k]; return ok }

// checkPublished answers nil when volume id exists and is published at
// path (an ordinary or the exclusive publication); rpc names the call.
func (d *Driver) checkPublished(rpc, id, path string) error {
	if id == "" {
		return status.Errorf(codes.InvalidArgument, "%s: volume_id is required", rpc)
	}
	if path == "" {
		return status.Errorf(codes.InvalidArgument, "%s %s: volume_path is required", rpc, id)
	}
	d.mu.Lock()
	v, ok := d.state.Volumes[id]
	published := ok && hasKey(v.Published, path)
	if rec, recorded := d.pubs.Get(id); recorded && rec.TargetPath == path {
		published = true
	}
	d.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "%s: volume %s does not exist", rpc, id)
	}
	if !published {
		return status.Errorf(codes.NotFound, "%s %s: not published at %s", rpc, id, path)
	}
	return nil
}
