// Package loopowner is a TEST-ONLY mount owner: it serves the mount owner's
// unix-socket protocol (internal/mountowner/api) and mounts each volume as
// a real go-fuse loopback filesystem of a directory "<root>/<volumeID>",
// instead of connecting to replica workers. The CSI plugin's tests use it
// to stage real FUSE mounts without a replicated volume behind them.
//
// Production code must never import it.
package loopowner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/cellfleet/cellfleet/internal/mountowner/api"
)

// Owner mounts loopback filesystems of directories under Root.
type Owner struct {
	Root string

	mu       sync.Mutex
	sessions map[string]*session // by target
	requests []api.MountRequest
}

type session struct {
	req    api.MountRequest
	server *fuse.Server
}

// New returns an owner serving volumes stored under root.
func New(root string) *Owner { return &Owner{Root: root, sessions: map[string]*session{}} }

// CreateVolume makes the backing directory of a volume.
func (o *Owner) CreateVolume(id string) error {
	if err := api.ValidVolumeID(id); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(o.Root, id), 0o755)
}

// DeleteVolume removes a volume's backing directory.
func (o *Owner) DeleteVolume(id string) error {
	if err := api.ValidVolumeID(id); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(o.Root, id))
}

// Requests returns every mount request received, for tests to check what
// the plugin sent.
func (o *Owner) Requests() []api.MountRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]api.MountRequest(nil), o.requests...)
}

// Mount mounts the volume's loopback filesystem at req.Target.
func (o *Owner) Mount(req api.MountRequest) error {
	if err := req.Validate(); err != nil {
		return &api.Error{Code: api.CodeInvalidArgument, Message: err.Error()}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests = append(o.requests, req)
	if s, ok := o.sessions[req.Target]; ok {
		if s.req.VolumeID != req.VolumeID {
			return &api.Error{Code: api.CodeTargetBusy, Message: req.Target + " holds volume " + s.req.VolumeID}
		}
		return nil
	}
	dir := filepath.Join(o.Root, req.VolumeID)
	if _, err := os.Stat(dir); err != nil {
		return &api.Error{Code: api.CodeUnavailable, Message: fmt.Sprintf("volume %s: %v", req.VolumeID, err)}
	}
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		return fmt.Errorf("loopback root %s: %w", dir, err)
	}
	mo := fuse.MountOptions{FsName: "cellfleet-test:" + req.VolumeID, Name: "cellfleet", DirectMount: true, AllowOther: true}
	if req.ReadOnly {
		mo.Options = append(mo.Options, "ro")
	}
	srv, err := fs.Mount(req.Target, root, &fs.Options{MountOptions: mo})
	if err != nil {
		return fmt.Errorf("mount %s at %s: %w", req.VolumeID, req.Target, err)
	}
	o.sessions[req.Target] = &session{req: req, server: srv}
	return nil
}

// Unmount ends the session at target (or of the volume); absent is success.
func (o *Owner) Unmount(req api.UnmountRequest) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for target, s := range o.sessions {
		if target != req.Target && s.req.VolumeID != req.VolumeID {
			continue
		}
		if err := s.server.Unmount(); err != nil {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
		delete(o.sessions, target)
	}
	return nil
}

// List returns the sessions.
func (o *Owner) List() []api.Session {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]api.Session, 0, len(o.sessions))
	for target, s := range o.sessions {
		out = append(out, api.Session{VolumeID: s.req.VolumeID, Target: target, State: api.StateMounted,
			Endpoints: s.req.Endpoints, ReadOnly: s.req.ReadOnly, SingleWriter: s.req.SingleWriter, OwnerPID: os.Getpid()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// UnmountAll ends every session (test cleanup).
func (o *Owner) UnmountAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for target, s := range o.sessions {
		_ = s.server.Unmount()
		delete(o.sessions, target)
	}
}

// Serve answers the protocol on lis until ctx ends.
func (o *Owner) Serve(ctx context.Context, lis net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathMount, func(w http.ResponseWriter, r *http.Request) {
		var req api.MountRequest
		if decode(w, r, &req) {
			err := o.Mount(req)
			answer(w, err, api.Session{VolumeID: req.VolumeID, Target: req.Target, State: api.StateMounted})
		}
	})
	mux.HandleFunc("POST "+api.PathUnmount, func(w http.ResponseWriter, r *http.Request) {
		var req api.UnmountRequest
		if decode(w, r, &req) {
			answer(w, o.Unmount(req), struct{}{})
		}
	})
	mux.HandleFunc("GET "+api.PathSessions, func(w http.ResponseWriter, _ *http.Request) {
		answer(w, nil, api.ListResponse{Sessions: o.List()})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, api.MaxRequestBytes)).Decode(v); err != nil {
		answer(w, &api.Error{Code: api.CodeInvalidArgument, Message: err.Error()}, nil)
		return false
	}
	return true
}

func answer(w http.ResponseWriter, err error, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		var e *api.Error
		if !errors.As(err, &e) {
			e = &api.Error{Code: api.CodeInternal, Message: err.Error()}
		}
		status := http.StatusInternalServerError
		switch e.Code {
		case api.CodeInvalidArgument:
			status = http.StatusBadRequest
		case api.CodeTargetBusy, api.CodeAlreadyMounted:
			status = http.StatusConflict
		case api.CodeUnavailable:
			status = http.StatusServiceUnavailable
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(e)
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}
