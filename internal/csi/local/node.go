package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
	"github.com/cellfleet/cellfleet/internal/csi/nodereq"
	"github.com/cellfleet/cellfleet/internal/csi/publication"
)

// Node is the local driver's Node service.
type Node struct {
	csi.UnimplementedNodeServer
	d *Driver
}

// Node returns the driver's Node service.
func (d *Driver) Node() *Node { return &Node{d: d} }

// NodeGetInfo names the node and its topology segment.
func (n *Node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             n.d.opts.NodeID,
		AccessibleTopology: &csi.Topology{Segments: n.d.topology()},
	}, nil
}

// NodeGetCapabilities lists stats, volume health and multi-writer.
func (n *Node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: nodeCaps(
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
	)}, nil
}

func nodeCaps(ts ...csi.NodeServiceCapability_RPC_Type) []*csi.NodeServiceCapability {
	out := make([]*csi.NodeServiceCapability, 0, len(ts))
	for _, t := range ts {
		out = append(out, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return out
}

// NodePublishVolume bind-mounts the volume's directory onto the target.
// Beneath the consumer root the publication is exclusive and recorded
// durably before the mount; elsewhere it is refused while such a record
// exists.
func (n *Node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	d := n.d
	id, target := req.GetVolumeId(), req.GetTargetPath()
	switch {
	case id == "":
		return nil, status.Error(codes.InvalidArgument, "NodePublishVolume: volume_id is required")
	case target == "":
		return nil, status.Errorf(codes.InvalidArgument, "NodePublishVolume %s: target_path is required", id)
	case req.GetVolumeCapability() == nil:
		return nil, status.Errorf(codes.InvalidArgument, "NodePublishVolume %s: volume_capability is required", id)
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "NodePublishVolume %s: %v", id, err)
	}
	if _, _, err := d.roots.Locate(target); err != nil {
		return nil, nodereq.PathError("NodePublishVolume", id, err)
	}
	readOnly := req.GetReadonly() ||
		req.GetVolumeCapability().GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.state.Volumes[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "NodePublishVolume: volume %s does not exist on node %s", id, d.opts.NodeID)
	}
	if d.exclusive(target) {
		holder := req.GetVolumeContext()[HolderContextKey]
		if holder == "" {
			holder = target
		}
		return &csi.NodePublishVolumeResponse{}, d.publishExclusive(v, target, holder, readOnly)
	}
	if rec, ok := d.pubs.Get(id); ok {
		return nil, status.Errorf(codes.FailedPrecondition,
			"NodePublishVolume %s: exclusively published by %s; ordinary publication waits for its unpublication", id, rec)
	}
	if err := v.Published.Admit(id, target, readOnly, singleWriter(req.GetVolumeCapability())); err != nil {
		return nil, err
	}
	f, err := d.openTarget(id, target)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := d.mountAt(v, f, readOnly); err != nil {
		return nil, err
	}
	return nodereq.Record(&v.Published, id, target, readOnly, d.state.Save, d.log)
}

// publishExclusive records, then mounts. Called with d.mu held.
func (d *Driver) publishExclusive(v *volume, target, holder string, readOnly bool) error {
	if rec, ok := d.pubs.Get(v.ID); ok && rec.TargetPath != target {
		return status.Errorf(codes.FailedPrecondition,
			"NodePublishVolume %s: already exclusively published by %s", v.ID, rec)
	}
	for _, rec := range d.pubs.List() {
		if rec.TargetPath == target && rec.VolumeID != v.ID {
			return status.Errorf(codes.FailedPrecondition,
				"NodePublishVolume %s: %s is held for volume %s by %s", v.ID, target, rec.VolumeID, rec)
		}
	}
	if len(v.Published) > 0 {
		return status.Errorf(codes.FailedPrecondition,
			"NodePublishVolume %s: exclusive publication refused while ordinary publications survive at %v", v.ID, keys(v.Published))
	}
	// Acquisition is refused while any other mount of the volume survives,
	// including one this plugin's state does not know (made by a
	// predecessor with another state root, or by hand): docs/csi.md,
	// "Consumer mount root: exclusive publication".
	others, err := mountpath.MountsOf(mountpath.SelfMountInfo, d.volumeDir(v.ID))
	if err != nil {
		return status.Errorf(codes.Internal, "NodePublishVolume %s: %v", v.ID, err)
	}
	for _, p := range others {
		if p != target {
			return status.Errorf(codes.FailedPrecondition,
				"NodePublishVolume %s: exclusive publication refused while the volume is still mounted at %s", v.ID, p)
		}
	}
	f, err := d.openTarget(v.ID, target)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, ok := d.pubs.Get(v.ID); !ok {
		rec := publication.Record{VolumeID: v.ID, TargetPath: target, Holder: holder, ReadOnly: readOnly,
			Node: d.opts.NodeID, CreatedAt: time.Now().UTC()}
		if err := d.pubs.Put(rec); err != nil {
			return status.Errorf(codes.Internal, "NodePublishVolume %s: %v", v.ID, err)
		}
	}
	if err := d.mountAt(v, f, readOnly); err != nil {
		return err // the record stays: a retry or a normal unpublication settles it
	}
	d.log.Info("local: volume exclusively published", "volume", v.ID, "target", target, "holder", holder)
	return nil
}

// openTarget resolves (and creates) the target directory beneath the
// roots, refusing traversal and symlinks, before anything is recorded.
func (d *Driver) openTarget(id, target string) (*os.File, error) {
	f, err := d.roots.OpenDir(target, true)
	if err != nil {
		return nil, nodereq.PathError("NodePublishVolume", id, err)
	}
	return f, nil
}

// mountAt bind-mounts the volume directory onto the opened target unless
// something is already mounted there (a retry after a crash between mount
// and save).
func (d *Driver) mountAt(v *volume, target *os.File, readOnly bool) error {
	if _, err := os.Stat(d.volumeDir(v.ID)); err != nil {
		return status.Errorf(codes.NotFound, "NodePublishVolume %s: volume directory: %v", v.ID, err)
	}
	mounted, err := mountpath.IsMountPoint(mountpath.SelfMountInfo, target.Name())
	if err != nil {
		return status.Errorf(codes.Internal, "NodePublishVolume %s: %v", v.ID, err)
	}
	if mounted {
		return nil
	}
	if err := mountpath.BindMount(d.volumeDir(v.ID), target, readOnly); err != nil {
		return status.Errorf(codes.Internal, "NodePublishVolume %s: %v", v.ID, err)
	}
	return nil
}

// NodeUnpublishVolume unmounts and removes the target, then drops the
// publication (the exclusive record last, after the unmount).
func (n *Node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	d := n.d
	id, target, err := nodereq.Unpublish(d.roots, req)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v, known := d.state.Volumes[id]
	rec, recorded := d.pubs.Get(id)
	if !known && !recorded {
		return nil, status.Errorf(codes.NotFound, "NodeUnpublishVolume: volume %s does not exist on node %s", id, d.opts.NodeID)
	}
	if err := unmountAndRemove(d.roots, target); err != nil {
		return nil, nodereq.PathError("NodeUnpublishVolume", id, err)
	}
	if recorded && rec.TargetPath == target {
		if err := d.pubs.Delete(id); err != nil {
			return nil, status.Errorf(codes.Internal, "NodeUnpublishVolume %s: %v", id, err)
		}
		d.log.Info("local: exclusive publication released", "volume", id, "target", target, "holder", rec.Holder)
	}
	if known {
		if _, ok := v.Published[target]; ok {
			delete(v.Published, target)
			if err := d.state.Save(); err != nil {
				return nil, status.Errorf(codes.Internal, "NodeUnpublishVolume %s: %v", id, err)
			}
		}
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// unmountAndRemove unmounts target if mounted and removes the directory.
// A target that no longer exists is already unpublished.
func unmountAndRemove(roots mountpath.Roots, target string) error {
	if err := roots.Check(target); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	mounted, err := mountpath.IsMountPoint(mountpath.SelfMountInfo, target)
	if err != nil {
		return err
	}
	if mounted {
		if err := mountpath.Unmount(target, false); err != nil {
			return err
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove target %s: %w", target, err)
	}
	return nil
}

// singleWriter reports the access mode that allows one publication only.
func singleWriter(c *csi.VolumeCapability) bool {
	return c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
}
