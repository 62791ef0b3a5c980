package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cellfleet/cellfleet/internal/replica"
)

// maxBody bounds an admin request body.
const maxBody = 64 << 10

// Handler serves /healthz, /readyz, /metrics and the admin API under /v1.
// Every /v1 request holds one of the host's shared HTTP operation slots;
// past the bound it is answered 503 with an Unavailable condition.
func (h *Host) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(h.metrics.reg, promhttp.HandlerOpts{}))
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/workers", func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, h.Statuses()) })
	api.HandleFunc("POST /v1/workers", h.addWorker)
	api.HandleFunc("GET /v1/workers/{volume}/{replica}", h.getWorker)
	api.HandleFunc("DELETE /v1/workers/{volume}/{replica}", h.removeWorker)
	api.HandleFunc("POST /v1/workers/{volume}/{replica}/members", h.addMember)
	api.HandleFunc("DELETE /v1/workers/{volume}/{replica}/members/{id}", h.removeMember)
	api.HandleFunc("POST /v1/workers/{volume}/{replica}/checkpoint", h.checkpoint)
	api.HandleFunc("GET /v1/workers/{volume}/{replica}/digest", h.digest)
	mux.Handle("/v1/", h.bounded(api))
	return mux
}

func (h *Host) bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.http.TryAcquire() {
			reply(w, http.StatusServiceUnavailable, &Condition{Condition: ConditionUnavailable, Reason: ReasonHTTPOperationLimitReached,
				Message: fmt.Sprintf("%d shared HTTP operations are in progress, the host's limit", h.cfg.Limits.MaxHTTPOperations)})
			return
		}
		defer h.http.Release()
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

type apiError struct {
	Error string `json:"error"`
}

func fail(w http.ResponseWriter, code int, err error) { reply(w, code, apiError{Error: err.Error()}) }

// readyz is ready when no worker is still pending or starting and every
// running worker is healthy (replica.Worker.Health).
func (h *Host) readyz(w http.ResponseWriter, _ *http.Request) {
	sts := h.Statuses()
	code := http.StatusOK
	for _, s := range sts {
		unhealthy := s.State == replica.ReplicaStateRunning && !s.Healthy
		if s.State == replica.ReplicaStatePending || s.State == replica.ReplicaStateStarting || unhealthy {
			code = http.StatusServiceUnavailable
		}
	}
	reply(w, code, sts)
}

func (h *Host) addWorker(w http.ResponseWriter, r *http.Request) {
	var spec WorkerSpec
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		fail(w, http.StatusBadRequest, fmt.Errorf("worker spec: %w", err))
		return
	}
	state, cond, err := h.Add(spec)
	switch {
	case errors.Is(err, ErrExists):
		fail(w, http.StatusConflict, err)
	case err != nil:
		fail(w, http.StatusBadRequest, err)
	case cond != nil && cond.Condition == ConditionUnavailable:
		reply(w, http.StatusServiceUnavailable, cond)
	case cond != nil:
		reply(w, http.StatusAccepted, struct {
			State replica.State `json:"state"`
			*Condition
		}{state, cond})
	default:
		reply(w, http.StatusCreated, struct {
			State replica.State `json:"state"`
		}{state})
	}
}

// getWorker reports one worker; with ?waitFor=STATE&timeout=D it waits
// (holding its HTTP operation slot) until the worker reaches STATE.
func (h *Host) getWorker(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("volume") + "/" + r.PathValue("replica")
	want := r.URL.Query().Get("waitFor")
	if want == "" {
		if _, st, ok := h.Worker(key); ok {
			reply(w, http.StatusOK, st)
			return
		}
		fail(w, http.StatusNotFound, fmt.Errorf("no worker %s", key))
		return
	}
	timeout, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil || timeout <= 0 || timeout > 5*time.Minute {
		fail(w, http.StatusBadRequest, errors.New("timeout must be a duration between 0 and 5m"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	st, err := h.WaitState(ctx, key, replica.State(want))
	if err != nil {
		reply(w, http.StatusGatewayTimeout, struct {
			Status
			Error string `json:"error"`
		}{st, err.Error()})
		return
	}
	reply(w, http.StatusOK, st)
}

func (h *Host) removeWorker(w http.ResponseWriter, r *http.Request) {
	if err := h.Remove(r.PathValue("volume") + "/" + r.PathValue("replica")); err != nil {
		fail(w, http.StatusNotFound, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Host) running(w http.ResponseWriter, r *http.Request) *replica.Worker {
	key := r.PathValue("volume") + "/" + r.PathValue("replica")
	wk, st, ok := h.Worker(key)
	if !ok || wk == nil || st.State != replica.ReplicaStateRunning {
		fail(w, http.StatusConflict, fmt.Errorf("worker %s is not running (%s)", key, st.State))
		return nil
	}
	return wk
}

func (h *Host) addMember(w http.ResponseWriter, r *http.Request) {
	wk := h.running(w, r)
	if wk == nil {
		return
	}
	var p replica.Peer
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &p)
	}
	if err != nil {
		fail(w, http.StatusBadRequest, fmt.Errorf("member: %w", err))
		return
	}
	if err := wk.AddReplica(p); err != nil {
		fail(w, memberCode(err), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Host) removeMember(w http.ResponseWriter, r *http.Request) {
	wk := h.running(w, r)
	if wk == nil {
		return
	}
	if err := wk.RemoveReplica(r.PathValue("id")); err != nil {
		fail(w, memberCode(err), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func memberCode(err error) int {
	if errors.Is(err, replica.ErrNotCoordinator) {
		return http.StatusMisdirectedRequest
	}
	return http.StatusServiceUnavailable
}

func (h *Host) checkpoint(w http.ResponseWriter, r *http.Request) {
	wk := h.running(w, r)
	if wk == nil {
		return
	}
	if err := wk.Checkpoint(); err != nil {
		fail(w, http.StatusServiceUnavailable, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Digest is a replica's applied index and state digest.
type Digest struct {
	Applied uint64 `json:"applied"`
	Digest  string `json:"digest"`
}

func (h *Host) digest(w http.ResponseWriter, r *http.Request) {
	wk := h.running(w, r)
	if wk == nil {
		return
	}
	idx, d, err := wk.Digest()
	if err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	reply(w, http.StatusOK, Digest{Applied: idx, Digest: d})
}
