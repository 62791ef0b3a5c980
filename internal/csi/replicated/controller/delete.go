package controller

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DeleteVolume deletes the ReplicatedVolume and succeeds once it is gone.
//
// The delete is bound to the UID read just before it, so it can only ever
// remove the volume this call looked at, never a later one of the same name.
// It carries no resourceVersion precondition: the decision to delete does not
// depend on the volume's state, and the volume controller's constant status
// writes would otherwise refuse it again and again. The object then stays,
// Deleting, while the volume controller's finalizer closes workers, waits for
// the hosts' release acknowledgements and reclaims the backing storage
// (docs/volume-controller.md, "Deletion"); until it is gone this answers
// ABORTED, and an API that answers ambiguously leaves storage preserved
// because nothing here deletes anything but the ReplicatedVolume itself.
func (c *Controller) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "DeleteVolume: volume_id is required")
	}
	if !isVolumeName(id) {
		return &csi.DeleteVolumeResponse{}, nil // no ReplicatedVolume can have this name: nothing to delete
	}
	rv, err := c.getVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	if rv == nil {
		return &csi.DeleteVolumeResponse{}, nil // already gone: idempotent
	}
	if rv.Annotations[AnnotationCSIName] == "" {
		return nil, status.Errorf(codes.FailedPrecondition,
			"DeleteVolume %s: the ReplicatedVolume was not provisioned through CSI (no %s annotation); refusing to delete it",
			id, AnnotationCSIName)
	}
	if rv.DeletionTimestamp == nil {
		uid := rv.UID
		err := c.client.Delete(ctx, rv, client.Preconditions{UID: &uid})
		switch {
		case apierrors.IsNotFound(err):
			return &csi.DeleteVolumeResponse{}, nil
		case apierrors.IsConflict(err):
			return nil, status.Errorf(codes.Aborted, "DeleteVolume %s: the volume changed identity (UID %s) while being deleted; retry", id, uid)
		case err != nil:
			return nil, status.Errorf(codes.Unavailable, "DeleteVolume %s: delete ReplicatedVolume (UID %s): %v", id, uid, err)
		}
		c.log.Info("csi controller: volume deletion requested", "volume", id, "uid", uid, "csiName", rv.Annotations[AnnotationCSIName])
	}
	if _, err := c.awaitVolume(ctx, id, "DeleteVolume", gone); err != nil {
		return nil, err
	}
	c.log.Info("csi controller: volume deleted", "volume", id)
	return &csi.DeleteVolumeResponse{}, nil
}
