package kubehost

// Publication (docs/csi.md, "How the replica host asks for the publication":
// no made-up kubelet Pod paths and no disks provisioned directly): the host
// is a CSI client of the local driver on its node. Before a worker starts it
// asks the local driver to publish the replica's backing PV beneath the
// consumer mount root (exclusive, recorded durably by the driver before it
// mounts), then waits for the bind in its own mount namespace. On release it
// asks for the unpublication only after the worker closed, and the release is
// acknowledged only after that.
//
// The host's -consumer-mount-root is the local driver's
// --consumer-mount-root (the same host directory, consumed HostToContainer),
// so the target path the host names is the path the driver mounts at.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
	"github.com/cellfleet/cellfleet/internal/csi/server"
)

// csiCallTimeout bounds one call to the local driver: publication is a
// bind mount and a durable record, never a long operation; a driver that
// hangs is reported and asked again on a later pass.
const csiCallTimeout = 30 * time.Second

// holderPrefix names the host as the holder of an exclusive publication:
// "replica-host/<replica>" (the local driver quotes it in its refusals).
const holderPrefix = "replica-host/"

// holder is the exclusive publication's holder of a replica.
func holder(vr *storagev1alpha1.VolumeReplica) string { return holderPrefix + vr.Name }

// publishCapability is how the host uses a backing volume: a filesystem,
// written by its one worker.
var publishCapability = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
}

// localDriver is the host's client of the local CSI driver's Node service.
type localDriver struct {
	conn *grpc.ClientConn
	node csi.NodeClient
}

// dialLocalDriver connects (lazily: gRPC dials on the first call) to the
// local driver's unix socket, "unix:///abs/path".
func dialLocalDriver(endpoint string) (*localDriver, error) {
	socket, err := server.ParseEndpoint(endpoint)
	if err != nil {
		return nil, fmt.Errorf("local CSI endpoint: %w", err)
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("local CSI endpoint %s: %w", endpoint, err)
	}
	return &localDriver{conn: conn, node: csi.NewNodeClient(conn)}, nil
}

func (l *localDriver) Close() error { return l.conn.Close() }

// backingPV reads the PV bound to the replica's claim and checks it is the
// local driver's. A refusal is an errRefused: asking again cannot help.
func (a *Agent) backingPV(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, error) {
	pv := &corev1.PersistentVolume{}
	if err := a.reader.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, pv); err != nil {
		return nil, fmt.Errorf("read backing volume %s of claim %s: %w", claim.Spec.VolumeName, claim.Name, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != local.DriverName || pv.Spec.CSI.VolumeHandle == "" {
		driver := "not a CSI volume"
		if pv.Spec.CSI != nil {
			driver = fmt.Sprintf("CSI driver %q, handle %q", pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
		}
		return nil, fmt.Errorf("%w: backing volume %s of claim %s is %s; the replica host publishes only %s volumes",
			errRefused, pv.Name, claim.Name, driver, local.DriverName)
	}
	return pv, nil
}

// errRefused marks a backing volume the host will not ask to publish.
var errRefused = errors.New("publication refused")

// publish asks the local driver for the exclusive publication of the
// claim's PV at <consumer root>/<PV name> and returns that path. It is
// idempotent: a publication the driver already recorded for this target
// (an earlier pass, or this host before a restart) is answered with success.
// The caller still waits for the bind in its own mount namespace.
func (a *Agent) publish(ctx context.Context, vr *storagev1alpha1.VolumeReplica, claim *corev1.PersistentVolumeClaim) (string, error) {
	pv, err := a.backingPV(ctx, claim)
	if err != nil {
		return "", err
	}
	target := filepath.Join(a.opts.ConsumerRoot, pv.Name)
	vc := maps.Clone(pv.Spec.CSI.VolumeAttributes)
	if vc == nil {
		vc = map[string]string{}
	}
	vc[local.HolderContextKey] = holder(vr)
	a.publishing.Lock()
	defer a.publishing.Unlock()
	if err := a.rememberPublication(publishedVolume{PV: pv.Name, VolumeID: pv.Spec.CSI.VolumeHandle, Replica: vr.Name,
		ReplicaUID: string(vr.UID)}); err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	_, err = a.local.node.NodePublishVolume(cctx, &csi.NodePublishVolumeRequest{
		VolumeId: pv.Spec.CSI.VolumeHandle, TargetPath: target, VolumeContext: vc,
		VolumeCapability: publishCapability, Readonly: false,
	})
	if err != nil {
		return "", fmt.Errorf("local driver NodePublishVolume of %s (volume %s) at %s: %w", pv.Name, pv.Spec.CSI.VolumeHandle, target, err)
	}
	a.log.Info("backing volume publication requested", "replica", vr.Name, "pv", pv.Name, "volumeID", pv.Spec.CSI.VolumeHandle,
		"target", target, "holder", holder(vr))
	return target, nil
}

// publishReason is the Published reason of a failed publication.
func publishReason(err error) storagev1alpha1.ConditionReason {
	if errors.Is(err, errRefused) {
		return storagev1alpha1.ReasonPublicationRefused
	}
	return storagev1alpha1.ReasonPublishFailed
}

// unpublish asks the local driver to unpublish the claim's PV from the
// consumer root. Called only after the replica's worker closed. A claim
// that is gone or not this replica's has nothing of ours to unpublish. The
// volume ID comes from the PV, or, once the PV is gone from the API (a lost
// backing volume), from the host's own publication record (published.go); a
// target still mounted with neither is an error, so the storage stays
// published and preserved.
func (a *Agent) unpublish(ctx context.Context, vr *storagev1alpha1.VolumeReplica, claim *corev1.PersistentVolumeClaim) error {
	if claim == nil || claim.Spec.VolumeName == "" {
		return nil
	}
	pvName := claim.Spec.VolumeName
	target := filepath.Join(a.opts.ConsumerRoot, pvName)
	a.publishing.Lock()
	defer a.publishing.Unlock()
	rec, recorded, err := a.recalledPublication(pvName)
	if err != nil {
		return err
	}
	volumeID := rec.VolumeID
	pv := &corev1.PersistentVolume{}
	err = a.reader.Get(ctx, client.ObjectKey{Name: pvName}, pv)
	switch {
	case apierrors.IsNotFound(err) && recorded:
		a.log.Info("backing volume gone from the API: unpublishing it by the host's record", "replica", vr.Name, "pv", pvName, "volumeID", volumeID)
	case apierrors.IsNotFound(err):
		if mounted, merr := mountpath.IsMountPoint(mountpath.SelfMountInfo, target); merr != nil || mounted {
			return fmt.Errorf("backing volume %s is gone from the API and the host has no record of its publication, but it is still published at %s (%v): its volume ID is unknown, left published",
				pvName, target, merr)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read backing volume %s to unpublish it: %w", pvName, err)
	case pv.Spec.CSI == nil || pv.Spec.CSI.Driver != local.DriverName:
		return nil // never published by this host (refused at publication)
	default:
		volumeID = pv.Spec.CSI.VolumeHandle
	}
	return a.unpublishRecorded(ctx, vr.Name, pvName, volumeID)
}

// unpublishRecorded asks the local driver to unpublish pvName (volumeID)
// from the consumer root and then forgets the host's record of it. The
// caller holds the publication lock and closed the replica's worker.
func (a *Agent) unpublishRecorded(ctx context.Context, replica, pvName, volumeID string) error {
	target := filepath.Join(a.opts.ConsumerRoot, pvName)
	cctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	if _, err := a.local.node.NodeUnpublishVolume(cctx, &csi.NodeUnpublishVolumeRequest{
		VolumeId: volumeID, TargetPath: target,
	}); err != nil {
		return fmt.Errorf("local driver NodeUnpublishVolume of %s (volume %s) at %s: %w", pvName, volumeID, target, err)
	}
	if err := a.forgetPublication(pvName); err != nil {
		return err
	}
	a.log.Info("backing volume unpublished", "replica", replica, "pv", pvName, "volumeID", volumeID, "target", target)
	return nil
}

// reportUnpublishFailure writes Released=False with the driver's error, so
// an operator sees why a deleted replica is not acknowledged.
func (a *Agent) reportUnpublishFailure(ctx context.Context, vr *storagev1alpha1.VolumeReplica, cause error) error {
	cur := vr.DeepCopy()
	meta.SetStatusCondition(&cur.Status.Conditions, *condition(storagev1alpha1.ReplicaReleased, false,
		storagev1alpha1.ReasonUnpublishFailed, "the worker is closed but its backing volume is not unpublished: "+cause.Error()))
	if err := a.client.Status().Update(ctx, cur); err != nil && !apierrors.IsNotFound(err) {
		return errors.Join(cause, fmt.Errorf("report the failed unpublication of VolumeReplica %s: %w", vr.Name, err))
	}
	return cause
}
