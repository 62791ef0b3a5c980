package replicated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/cellfleet/cellfleet/internal/mountowner/api"
)

// MountOwner is the FUSE mount owner as the plugin sees it: the process
// that holds the FUSE sessions (it outlives plugin restarts) and mounts a
// volume's filesystem at a staging path. OwnerClient speaks the owner's
// unix-socket protocol (internal/mountowner/api); tests may substitute any
// implementation.
type MountOwner interface {
	// Mount makes the volume's FUSE filesystem appear at stagingPath and
	// returns once it is mounted. Mounting the same volume at the same path
	// again succeeds.
	Mount(ctx context.Context, volumeID, stagingPath string, opts MountOptions) error
	// Unmount ends the session at stagingPath; nothing mounted is success.
	Unmount(ctx context.Context, volumeID, stagingPath string) error
	// List returns the sessions the owner holds.
	List(ctx context.Context) ([]OwnedMount, error)
}

// MountOptions are what NodeStageVolume passes on.
type MountOptions struct {
	ReadOnly bool
	// SingleWriter: the access mode lets one node write (the mount may
	// cache attributes, names and pages).
	SingleWriter  bool
	VolumeContext map[string]string
	Secrets       map[string]string // never logged, never persisted
}

// OwnedMount is one session the owner holds.
type OwnedMount struct {
	VolumeID    string
	StagingPath string
	// Lost: the session's mount is gone (its owner died); unmount forgets it.
	Lost bool
}

// Volume-context keys the replicated driver's CreateVolume publishes and
// NodeStageVolume reads.
const (
	// ContextEndpoints is a JSON array of {"id","address","serverName"}: the
	// volume's replica workers.
	ContextEndpoints = "replicated.storage.eric.dev/endpoints"
	// ContextCapacityBytes is the provisioned capacity, in bytes (decimal).
	ContextCapacityBytes = "replicated.storage.eric.dev/capacityBytes"
)

// Node-stage secret keys (the volume's trust Secret, passed by kubelet via
// csi.storage.k8s.io/node-stage-secret-name/namespace).
const (
	SecretCA    = "ca.crt"      // the volume's CA certificate, PEM
	SecretToken = "mount-token" // the bearer token of mount owners (the volume controller's mount Secret key)
)

// ErrorCode classifies a refusal of the mount owner.
type ErrorCode string

// The codes the plugin maps to CSI codes.
const (
	CodeInvalidArgument ErrorCode = "InvalidArgument" // malformed or incomplete request
	CodeConflict        ErrorCode = "Conflict"        // mounted elsewhere, or the target holds another volume
	CodeUnavailable     ErrorCode = "Unavailable"     // the volume did not answer; retry
	CodeUnauthorized    ErrorCode = "Unauthorized"    // the workers rejected the token
	CodeInternal        ErrorCode = "Internal"
)

// OwnerError is a refusal from the mount owner.
type OwnerError struct {
	Code    ErrorCode
	Message string
}

func (e *OwnerError) Error() string { return fmt.Sprintf("mount owner: %s: %s", e.Code, e.Message) }

// ErrOwnerUnreachable: the owner's socket did not answer.
var ErrOwnerUnreachable = errors.New("mount owner unreachable")

// OwnerClient is a MountOwner backed by the owner's socket protocol.
type OwnerClient struct{ c *api.Client }

// NewOwnerClient returns a client of the owner listening at socket.
func NewOwnerClient(socket string) *OwnerClient { return &OwnerClient{c: api.NewClient(socket)} }

// mountRequest translates a stage request into the owner's request; what
// is missing is the caller's fault (INVALID_ARGUMENT), checked before the
// owner is asked.
func mountRequest(volumeID, stagingPath string, opts MountOptions) (api.MountRequest, error) {
	req := api.MountRequest{VolumeID: volumeID, Target: stagingPath, ReadOnly: opts.ReadOnly, SingleWriter: opts.SingleWriter,
		CAPEM: opts.Secrets[SecretCA], Token: opts.Secrets[SecretToken]}
	raw, ok := opts.VolumeContext[ContextEndpoints]
	if !ok {
		return req, &OwnerError{Code: CodeInvalidArgument, Message: "volume context lacks " + ContextEndpoints}
	}
	if err := json.Unmarshal([]byte(raw), &req.Endpoints); err != nil {
		return req, &OwnerError{Code: CodeInvalidArgument, Message: fmt.Sprintf("volume context %s: %v", ContextEndpoints, err)}
	}
	if c, ok := opts.VolumeContext[ContextCapacityBytes]; ok {
		n, err := strconv.ParseUint(c, 10, 64)
		if err != nil {
			return req, &OwnerError{Code: CodeInvalidArgument, Message: fmt.Sprintf("volume context %s: %v", ContextCapacityBytes, err)}
		}
		req.CapacityBytes = n
	}
	if err := req.Validate(); err != nil {
		return req, &OwnerError{Code: CodeInvalidArgument, Message: "stage request (volume context and node-stage secrets): " + err.Error()}
	}
	return req, nil
}

// ownerErr maps the protocol's errors to OwnerError; a transport failure
// is ErrOwnerUnreachable.
func ownerErr(err error) error {
	if err == nil {
		return nil
	}
	var e *api.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("%w: %w", ErrOwnerUnreachable, err)
	}
	code := CodeInternal
	switch e.Code {
	case api.CodeInvalidArgument:
		code = CodeInvalidArgument
	case api.CodeAlreadyMounted, api.CodeTargetBusy:
		code = CodeConflict
	case api.CodeUnavailable:
		code = CodeUnavailable
	case api.CodeUnauthorized:
		code = CodeUnauthorized
	}
	return &OwnerError{Code: code, Message: e.Message}
}

// Mount implements MountOwner.
func (o *OwnerClient) Mount(ctx context.Context, volumeID, stagingPath string, opts MountOptions) error {
	req, err := mountRequest(volumeID, stagingPath, opts)
	if err != nil {
		return err
	}
	_, err = o.c.Mount(ctx, req)
	return ownerErr(err)
}

// Unmount implements MountOwner; the session is named by its target.
func (o *OwnerClient) Unmount(ctx context.Context, _, stagingPath string) error {
	return ownerErr(o.c.Unmount(ctx, stagingPath))
}

// List implements MountOwner.
func (o *OwnerClient) List(ctx context.Context) ([]OwnedMount, error) {
	ss, err := o.c.List(ctx)
	if err != nil {
		return nil, ownerErr(err)
	}
	out := make([]OwnedMount, 0, len(ss))
	for _, s := range ss {
		out = append(out, OwnedMount{VolumeID: s.VolumeID, StagingPath: s.Target, Lost: s.State == api.StateLost})
	}
	return out, nil
}
