// Package nodereq holds the checks both node drivers (internal/csi/local,
// internal/csi/replicated) make of a request before they act: required
// fields, the target path resolved beneath the configured roots, and the CSI
// code of a path that fails; and the parts of their answers they share: the
// record of a volume's publications (publications.go) and its health
// entries. It must never import a driver package.
package nodereq

import (
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
)

// PathError maps a mountpath error to the CSI code: paths outside the roots
// or through symlinks are the caller's fault, anything else is internal.
func PathError(rpc, id string, err error) error {
	if errors.Is(err, mountpath.ErrOutsideRoots) || errors.Is(err, mountpath.ErrSymlink) || errors.Is(err, mountpath.ErrNotDir) {
		return status.Errorf(codes.InvalidArgument, "%s %s: %v", rpc, id, err)
	}
	return status.Errorf(codes.Internal, "%s %s: %v", rpc, id, err)
}

// Unpublish checks a NodeUnpublishVolume request: both fields present and
// the target beneath roots.
func Unpublish(roots mountpath.Roots, req *csi.NodeUnpublishVolumeRequest) (id, target string, err error) {
	const rpc = "NodeUnpublishVolume"
	id, target = req.GetVolumeId(), req.GetTargetPath()
	if id == "" {
		return "", "", status.Error(codes.InvalidArgument, rpc+": volume_id is required")
	}
	if target == "" {
		return "", "", status.Errorf(codes.InvalidArgument, "%s %s: target_path is required", rpc, id)
	}
	if _, _, err := roots.Locate(target); err != nil {
		return "", "", PathError(rpc, id, err)
	}
	return id, target, nil
}
