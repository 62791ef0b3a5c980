// Package controller is the Controller service of the
// replicated.storage.eric.dev CSI driver, served by the manager on a unix
// socket behind the csi-provisioner sidecar (docs/csi.md, "The replicated
// driver's controller"; the provisioning flow in docs/architecture.md,
// "Replicated volume").
//
// It translates CSI calls into ReplicatedVolume intent and waits on the
// volume controller's report; it never places replicas, writes trust or
// touches backing claims (internal/controller/volume does):
//
//   - CreateVolume records the immutable access mode, replica count,
//     requested capacity, backing class and source claim in a
//     ReplicatedVolume, and succeeds only once the volume is Placed and Ready
//     (a coordinator serves with a quorum); until then it answers ABORTED
//     saying what it waits for, and the provisioner retries. It never
//     answers with a volume of fewer replicas than asked.
//   - DeleteVolume deletes the ReplicatedVolume bound to its UID and succeeds
//     once the object is gone (the volume controller's finalizer orders the
//     teardown).
//   - ControllerExpandVolume grows spec.capacity; the volume controller grows
//     the state machine and backing claims, the node side the mount.
//
// The Kubernetes API is its only state: every answer is derived from what
// the API holds now, so any number of retries, and a restarted manager, give
// the same result. It must never import internal/controller/volume or the
// local driver; from internal/csi/replicated it takes only the driver's
// name and the names NodeStage reads, never calls its Node service.
package controller

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// DefaultReadyWait is how long one CreateVolume or DeleteVolume call waits
// for the volume controller before answering ABORTED: long enough that a
// volume which becomes Ready quickly is returned by the same call, shorter
// than csi-provisioner's default 10 s --timeout so the answer reaches it.
const DefaultReadyWait = 5 * time.Second

// pollInterval is how often a waiting call re-reads the volume.
const pollInterval = 200 * time.Millisecond

// Options configure a Controller.
type Options struct {
	// Client writes ReplicatedVolumes (create, update, delete).
	Client client.Client
	// Reader reads from the API server directly (the manager's APIReader):
	// CSI calls are rare, and an uncached read never answers from a stale
	// cache that the volume was not created yet.
	Reader client.Reader
	// ReplicaNamespace is where the volume controller keeps VolumeReplicas
	// (the manager's --storage-namespace); CreateVolume reads the replicas' endpoints
	// there for the volume context.
	ReplicaNamespace string
	// ReadyWait bounds how long one call waits (DefaultReadyWait if zero).
	ReadyWait time.Duration
	Log       *slog.Logger
}

// Controller is the replicated driver's CSI Controller service.
type Controller struct {
	csi.UnimplementedControllerServer

	client    client.Client
	reader    client.Reader
	namespace string
	wait      time.Duration
	log       *slog.Logger
}

// New returns the Controller service.
func New(opts Options) (*Controller, error) {
	if opts.Client == nil || opts.Reader == nil || opts.ReplicaNamespace == "" {
		return nil, errors.New("replicated CSI controller: client, reader and replica namespace are required")
	}
	c := &Controller{client: opts.Client, reader: opts.Reader, namespace: opts.ReplicaNamespace,
		wait: opts.ReadyWait, log: opts.Log}
	if c.wait <= 0 {
		c.wait = DefaultReadyWait
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c, nil
}

// controllerCapabilities are the RPCs this service implements.
var controllerCapabilities = []csi.ControllerServiceCapability_RPC_Type{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	// As the node plugin: ReadWriteOnce arrives as SINGLE_NODE_MULTI_WRITER.
	csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
}

// ControllerGetCapabilities lists create/delete, expansion, capacity and the
// single-node multi-writer mode.
func (c *Controller) ControllerGetCapabilities(_ context.Context, _ *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	caps := make([]*csi.ControllerServiceCapability, 0, len(controllerCapabilities))
	for _, t := range controllerCapabilities {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// volume is the API object of one replicated volume.
type volume = storagev1alpha1.ReplicatedVolume
