package mountowner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/cellfleet/cellfleet/internal/mountowner/api"
)

// Serve answers the protocol on a unix socket at path until ctx ends. The
// socket is created with mode 0600: only root (the CSI plugin) may ask.
func (o *Owner) Serve(ctx context.Context, path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove old socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: o.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	o.log.Info("mount owner serving", "socket", path)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler is the protocol's HTTP handler.
func (o *Owner) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathMount, o.handleMount)
	mux.HandleFunc("POST "+api.PathUnmount, o.handleUnmount)
	mux.HandleFunc("GET "+api.PathSessions, o.handleList)
	return mux
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, api.MaxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		answer(w, &api.Error{Code: api.CodeInvalidArgument, Message: "malformed request: " + err.Error()}, nil)
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		answer(w, &api.Error{Code: api.CodeInvalidArgument, Message: "trailing data after the request"}, nil)
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
		w.WriteHeader(statusOf(e.Code))
		_ = json.NewEncoder(w).Encode(e)
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}

func statusOf(c api.Code) int {
	switch c {
	case api.CodeInvalidArgument:
		return http.StatusBadRequest
	case api.CodeAlreadyMounted, api.CodeTargetBusy:
		return http.StatusConflict
	case api.CodeUnavailable:
		return http.StatusServiceUnavailable
	case api.CodeUnauthorized:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

func (o *Owner) handleMount(w http.ResponseWriter, r *http.Request) {
	var req api.MountRequest
	if !decode(w, r, &req) {
		return
	}
	// Mount on the owner's goroutine: the caller disconnecting must not
	// leave a half-made mount, so the work outlives the request.
	type result struct {
		s   api.Session
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := o.Mount(req)
		done <- result{s, err}
	}()
	select {
	case res := <-done:
		answer(w, res.err, res.s)
	case <-r.Context().Done():
		// The caller left; the mount completes (or fails) on its own and
		// the caller's retry finds the session.
	}
}

func (o *Owner) handleUnmount(w http.ResponseWriter, r *http.Request) {
	var req api.UnmountRequest
	if !decode(w, r, &req) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answer(w, o.Unmount(ctx, req), struct{}{})
}

func (o *Owner) handleList(w http.ResponseWriter, r *http.Request) {
	answer(w, nil, api.ListResponse{Sessions: o.List()})
}
