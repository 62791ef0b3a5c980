package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// How capacity is known. Every replica's backing claim requests the
// volume's capacity from the backing class on its own node, so a volume of
// R replicas fits only if R distinct nodes each have that much. The local
// driver's csi-provisioner, run per node with --enable-capacity, publishes
// what each node has as CSIStorageCapacity objects of the backing class,
// one per node (topology segment). From them:
//
//   - the backing class's limit for a volume of R replicas is the R-th
//     largest per-node figure (maximumVolumeSize where the node reports it,
//     else capacity); CreateVolume and ControllerExpandVolume refuse more
//     with OUT_OF_RANGE;
//   - GetCapacity answers that same figure, the largest volume that fits now.
//
// When the backing class publishes no CSIStorageCapacity at all, the limit
// is unknown: CreateVolume and ControllerExpandVolume accept the request
// (the backing claims then wait for space, which the volume controller
// reports), and GetCapacity answers UNAVAILABLE saying what is missing.

// errCapacityUnknown: the backing class publishes no capacity.
var errCapacityUnknown = errors.New("no CSIStorageCapacity is published for the backing class " +
	"(run its csi-provisioner with --enable-capacity)")

// requestedBytes is the capacity to record for a range: required_bytes, or
// limit_bytes when only a limit is given. A range asking for no bytes is
// refused: a volume of no capacity cannot hold its journal.
func requestedBytes(r *csi.CapacityRange) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	switch {
	case req < 0 || lim < 0:
		return 0, fmt.Errorf("capacity_range must not be negative (required_bytes %d, limit_bytes %d)", req, lim)
	case lim > 0 && req > lim:
		return 0, fmt.Errorf("capacity_range.required_bytes %d exceeds limit_bytes %d", req, lim)
	case req == 0 && lim == 0:
		return 0, errors.New("capacity 0 requested: capacity_range.required_bytes must be greater than zero " +
			"(the claim's storage request)")
	case req == 0:
		return lim, nil
	}
	return req, nil
}

// nodeCapacities lists, for each node publishing capacity of the backing
// class, the largest backing volume it can take now.
func (c *Controller) nodeCapacities(ctx context.Context, class string) ([]int64, error) {
	var list storagev1.CSIStorageCapacityList
	if err := c.reader.List(ctx, &list); err != nil {
		return nil, status.Errorf(codes.Unavailable, "list CSIStorageCapacity of backing class %s: %v", class, err)
	}
	// One object per topology segment and class; a segment is a node for the
	// local driver. Keyed by segment so a duplicate cannot count twice.
	perSegment := map[string]int64{}
	for _, sc := range list.Items {
		if sc.StorageClassName != class {
			continue
		}
		b := int64(0)
		switch {
		case sc.MaximumVolumeSize != nil:
			b = sc.MaximumVolumeSize.Value()
		case sc.Capacity != nil:
			b = sc.Capacity.Value()
		}
		key := metav1.FormatLabelSelector(sc.NodeTopology)
		perSegment[key] = max(perSegment[key], b)
	}
	if len(perSegment) == 0 {
		return nil, errCapacityUnknown
	}
	out := make([]int64, 0, len(perSegment))
	for _, b := range perSegment {
		out = append(out, b)
	}
	return out, nil
}

// largestFitting is the largest volume R distinct nodes can each hold: the
// R-th largest figure, or 0 when fewer nodes publish capacity.
func largestFitting(perNode []int64, replicas int32) int64 {
	if int(replicas) > len(perNode) || replicas < 1 {
		return 0
	}
	s := slices.Clone(perNode)
	slices.Sort(s)
	slices.Reverse(s)
	return s[replicas-1]
}

// checkLimit refuses bytes above the backing class's limit for replicas.
func (c *Controller) checkLimit(ctx context.Context, rpc, class string, replicas int32, bytes int64) error {
	perNode, err := c.nodeCapacities(ctx, class)
	if errors.Is(err, errCapacityUnknown) {
		c.log.Info("csi controller: capacity limit unknown; accepting", "rpc", rpc, "backingClass", class, "bytes", bytes)
		return nil
	}
	if err != nil {
		return err
	}
	if limit := largestFitting(perNode, replicas); bytes > limit {
		return status.Errorf(codes.OutOfRange,
			"%s: capacity %d bytes is past backing StorageClass %s's limit of %d bytes for %d replicas "+
				"(%d nodes publish capacity; each replica needs a node of its own with room for the whole capacity)",
			rpc, bytes, class, limit, replicas, len(perNode))
	}
	return nil
}

// GetCapacity answers the largest volume of the class's parameters that
// fits now. Without a backing class in the parameters nothing can be
// provisioned, so it answers 0.
func (c *Controller) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	for _, vc := range req.GetVolumeCapabilities() {
		if err := checkCapability(vc); err != nil {
			return &csi.GetCapacityResponse{AvailableCapacity: 0}, nil
		}
	}
	p, err := parseParameters(req.GetParameters(), false)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "GetCapacity: %v", err)
	}
	if p.backingClass == "" {
		return &csi.GetCapacityResponse{AvailableCapacity: 0}, nil
	}
	perNode, err := c.nodeCapacities(ctx, p.backingClass)
	if errors.Is(err, errCapacityUnknown) {
		return nil, status.Errorf(codes.Unavailable, "GetCapacity: backing class %s: %v", p.backingClass, err)
	}
	if err != nil {
		return nil, err
	}
	fit := largestFitting(perNode, p.replicas)
	return &csi.GetCapacityResponse{AvailableCapacity: fit, MaximumVolumeSize: wrapperspb.Int64(fit)}, nil
}
