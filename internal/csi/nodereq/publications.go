package nodereq

import (
	"log/slog"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Publications maps each target path a volume is published at to its
// read-only flag: the record both node drivers keep of a volume.
type Publications map[string]bool

// Admit refuses a NodePublishVolume of volume id at target that the
// publications rule out: a second target of a single-writer volume, or the
// same target with the other read-only flag (docs/csi.md).
func (p Publications) Admit(id, target string, readOnly, singleWriter bool) error {
	if singleWriter {
		for t := range p {
			if t != target {
				return status.Errorf(codes.FailedPrecondition,
					"NodePublishVolume %s: SINGLE_NODE_SINGLE_WRITER, but already published at %s", id, t)
			}
		}
	}
	if ro, ok := p[target]; ok && ro != readOnly {
		return status.Errorf(codes.AlreadyExists, "NodePublishVolume %s: already published at %s with read-only=%v", id, target, ro)
	}
	return nil
}

// Record is NodePublishVolume's last step in both drivers: target is added
// to *p and the driver's state saved with save.
func Record(p *Publications, id, target string, readOnly bool, save func() error, log *slog.Logger) (*csi.NodePublishVolumeResponse, error) {
	if *p == nil {
		*p = Publications{}
	}
	(*p)[target] = readOnly
	if err := save(); err != nil {
		return nil, status.Errorf(codes.Internal, "NodePublishVolume %s: %v", id, err)
	}
	log.Info("volume published", "volume", id, "target", target, "readOnly", readOnly)
	return &csi.NodePublishVolumeResponse{}, nil
}

// HealthID checks a NodeGetVolumeHealth request and returns its volume.
func HealthID(req *csi.NodeGetVolumeHealthRequest) (string, error) {
	id := req.GetVolumeId()
	if id == "" {
		return "", status.Error(codes.InvalidArgument, "NodeGetVolumeHealth: volume_id is required")
	}
	return id, nil
}

// Inaccessible is a volume health entry saying the volume cannot be used,
// with the driver's reason.
func Inaccessible(reason, msg string) *csi.VolumeHealth_VolumeHealthEntry {
	return &csi.VolumeHealth_VolumeHealthEntry{Status: csi.VolumeHealthErrorType_INACCESSIBLE, Reason: reason, Message: msg}
}
