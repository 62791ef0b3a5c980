// Package api is the mount owner's unix-socket protocol: the request and
// session types and a small Go client (Mount, Unmount, List) for the CSI
// node plugin and the dev tools. The protocol is JSON over HTTP/1.1 on a
// unix socket (docs/fuse.md, "Mount owner"):
//
//	POST /v1/mount     MountRequest  -> Session
//	POST /v1/unmount   UnmountRequest -> {}
//	GET  /v1/sessions                -> ListResponse
//
// Errors answer a non-2xx status with an Error body whose Code is one of
// the Code constants.
//
// api must never import the FUSE filesystem, the replica client or anything
// Kubernetes: callers stay small.
package api

import (
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"time"
)

// Bounds of a request, checked on both sides of the socket.
const (
	MaxVolumeIDLen = 128
	MaxTargetLen   = 4096
	MaxEndpoints   = 5
	MaxCAPEMBytes  = 64 << 10
	MinTokenLen    = 16
	MaxTokenLen    = 4096
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes = 256 << 10
)

// Endpoint is one replica worker of the volume.
type Endpoint struct {
	ID         string `json:"id"`         // replica ID as the workers name it ("r0")
	Address    string `json:"address"`    // host:port of the worker's listener
	ServerName string `json:"serverName"` // DNS SAN the worker's certificate carries
}

// MountRequest asks for the volume to be mounted at Target.
type MountRequest struct {
	VolumeID  string     `json:"volumeID"`
	Target    string     `json:"target"` // absolute path of an existing directory (the staging path)
	Endpoints []Endpoint `json:"endpoints"`
	CAPEM     string     `json:"caPEM"` // the volume's CA certificate, PEM
	Token     string     `json:"token"` // the volume's bearer token (never persisted by the owner)
	// CapacityBytes is the volume's provisioned capacity, recorded with the
	// session; statfs reports the engine's own figure.
	CapacityBytes uint64 `json:"capacityBytes"`
	// SingleWriter is true for ReadWriteOnce and ReadWriteOncePod volumes:
	// the mount then caches attributes, names and pages.
	SingleWriter bool `json:"singleWriter"`
	ReadOnly     bool `json:"readOnly"`
}

// UnmountRequest names a session by volume ID or by target path.
type UnmountRequest struct {
	VolumeID string `json:"volumeID,omitempty"`
	Target   string `json:"target,omitempty"`
}

// State is a session's lifecycle state.
type State string

// Session states.
const (
	// StateMounting: the record is written, the mount is being made.
	StateMounting State = "Mounting"
	// StateMounted: the mount serves.
	StateMounted State = "Mounted"
	// StateLost: the mount is gone (its owner died, or it was unmounted
	// behind the owner's back); the target was cleaned. Mount again, or
	// Unmount to forget it.
	StateLost State = "Lost"
)

// Session is one volume's mount as the owner reports it.
type Session struct {
	VolumeID      string     `json:"volumeID"`
	Target        string     `json:"target"`
	State         State      `json:"state"`
	Reason        string     `json:"reason,omitempty"`
	Endpoints     []Endpoint `json:"endpoints"`
	CapacityBytes uint64     `json:"capacityBytes"`
	SingleWriter  bool       `json:"singleWriter"`
	ReadOnly      bool       `json:"readOnly"`
	// FencingEpoch is the epoch a writable single-writer mount opened
	// (docs/fuse.md, "Fencing"); 0 for mounts that fence nothing.
	FencingEpoch uint64    `json:"fencingEpoch,omitempty"`
	OwnerPID     int       `json:"ownerPID"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// ListResponse is the answer of GET /v1/sessions.
type ListResponse struct {
	Sessions []Session `json:"sessions"`
}

// Code classifies an error answer.
type Code string

// Error codes.
const (
	CodeInvalidArgument Code = "InvalidArgument"
	CodeAlreadyMounted  Code = "AlreadyMounted" // the volume is mounted at another target
	CodeTargetBusy      Code = "TargetBusy"     // another volume is mounted at the target
	CodeUnavailable     Code = "Unavailable"    // the volume did not answer (no quorum, network)
	CodeUnauthorized    Code = "Unauthorized"   // the workers rejected the token
	CodeInternal        Code = "Internal"
)

// Error is an error answer.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// IsCode reports whether err is an Error answer with the given code.
func IsCode(err error, code Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

var volumeIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]*$`)

// ValidVolumeID reports whether id may name a volume (it names files).
func ValidVolumeID(id string) error {
	if len(id) == 0 || len(id) > MaxVolumeIDLen || !volumeIDPattern.MatchString(id) {
		return fmt.Errorf("volume ID %q must be 1 to %d characters of letters, digits, '.', '_' or '-', starting with a letter or digit", id, MaxVolumeIDLen)
	}
	return nil
}

// ValidTarget reports whether p may be a mount target.
func ValidTarget(p string) error {
	if len(p) == 0 || len(p) > MaxTargetLen || !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
		return fmt.Errorf("target %q must be a clean absolute path below / of at most %d bytes", p, MaxTargetLen)
	}
	return nil
}

// Validate checks a mount request's bounds and form.
func (r *MountRequest) Validate() error {
	var errs []error
	if err := ValidVolumeID(r.VolumeID); err != nil {
		errs = append(errs, err)
	}
	if err := ValidTarget(r.Target); err != nil {
		errs = append(errs, err)
	}
	if len(r.Endpoints) == 0 || len(r.Endpoints) > MaxEndpoints {
		errs = append(errs, fmt.Errorf("%d endpoints given, want 1 to %d", len(r.Endpoints), MaxEndpoints))
	}
	seen := map[string]bool{}
	for _, ep := range r.Endpoints {
		if ep.ID == "" || ep.Address == "" || ep.ServerName == "" || len(ep.ID)+len(ep.Address)+len(ep.ServerName) > 1024 {
			errs = append(errs, fmt.Errorf("endpoint %+v needs an ID, an address and a server name", ep))
		}
		if seen[ep.ID] {
			errs = append(errs, fmt.Errorf("endpoint ID %q given twice", ep.ID))
		}
		seen[ep.ID] = true
	}
	if len(r.CAPEM) == 0 || len(r.CAPEM) > MaxCAPEMBytes {
		errs = append(errs, fmt.Errorf("CA PEM of %d bytes, want 1 to %d", len(r.CAPEM), MaxCAPEMBytes))
	} else if !x509.NewCertPool().AppendCertsFromPEM([]byte(r.CAPEM)) {
		errs = append(errs, errors.New("CA PEM holds no certificate"))
	}
	if len(r.Token) < MinTokenLen || len(r.Token) > MaxTokenLen {
		errs = append(errs, fmt.Errorf("bearer token must be %d to %d bytes", MinTokenLen, MaxTokenLen))
	}
	return errors.Join(errs...)
}

// Validate checks that exactly one of VolumeID and Target is given.
func (r *UnmountRequest) Validate() error {
	switch {
	case r.VolumeID != "" && r.Target != "":
		return errors.New("give a volume ID or a target, not both")
	case r.VolumeID != "":
		return ValidVolumeID(r.VolumeID)
	case r.Target != "":
		return ValidTarget(r.Target)
	}
	return errors.New("a volume ID or a target is required")
}
