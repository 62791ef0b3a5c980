package host

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the host's network listener: /healthz, /readyz, /metrics
// and the read-only worker status (GET /v1/workers and
// GET /v1/workers/{volume}/{replica}: each worker's state, role, indexes
// and health). It routes no mutation, no digest and no long poll: those are the
// admin API's (AdminHandler), served only on the local unix socket
// (docs/decisions/0003-host-admin-authority.md). A mutating request here
// is answered 404 or 405 and changes nothing.
func (h *Host) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(h.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/workers", h.listWorkers)
	mux.HandleFunc("GET /v1/workers/{volume}/{replica}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("waitFor") {
			// A long poll holds a shared HTTP operation slot for minutes:
			// unauthenticated callers must not be able to take them all.
			fail(w, http.StatusForbidden, errors.New("waitFor is served on the host's admin socket only"))
			return
		}
		h.getWorker(w, r)
	})
	return mux
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

// readyz says whether the host can take work: it is open (not closing) and
// the mode's own check passes (Kubernetes mode: its Lease is renewed, so it
// reaches the API server; kubehost/lease.go). It does not say whether every
// worker is healthy: a probe failing for one sick worker, or for a follower
// rebuilding from a checkpoint, would take the whole node out of service
// and, through the orchestrator, its healthy replicas with it
// (docs/decisions/0011-node-leases.md). Each worker's health is in its
// status (GET /v1/workers, Healthy and HealthReason) and in the metric
// cellfleet_replica_healthy.
func (h *Host) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := h.readiness(); err != nil {
		reply(w, http.StatusServiceUnavailable, readiness{Ready: false, Reason: err.Error()})
		return
	}
	reply(w, http.StatusOK, readiness{Ready: true})
}

// readiness is /readyz's answer.
type readiness struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

// SetReadiness adds the mode's readiness check to /readyz; nil removes it.
func (h *Host) SetReadiness(check func() error) {
	if check == nil {
		h.ready.Store(nil)
		return
	}
	h.ready.Store(&check)
}

func (h *Host) readiness() error {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return errors.New("the host is closing")
	}
	if check := h.ready.Load(); check != nil {
		return (*check)()
	}
	return nil
}

func (h *Host) listWorkers(w http.ResponseWriter, _ *http.Request) {
	reply(w, http.StatusOK, h.Statuses())
}
