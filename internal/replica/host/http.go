package host

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cellfleet/cellfleet/internal/replica"
)

// Handler serves the host's network listener: /healthz, /readyz, /metrics
// and the read-only worker status (GET /v1/workers and
// GET /v1/workers/{volume}/{replica}, the same reports /readyz already
// gives). It routes no mutation, no digest and no long poll: those are the
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

// readyz is ready when every worker serves as a working member: none is
// still pending or starting, none failed or lost its authority, and every
// running one is healthy (replica.Worker.Health: its appends succeed and
// its journal keeps up). A host must never look ready while one of its
// replicas cannot carry its share of a quorum. A stopped worker is being
// removed by the host and does not count.
func (h *Host) readyz(w http.ResponseWriter, _ *http.Request) {
	sts := h.Statuses()
	code := http.StatusOK
	for _, s := range sts {
		if !servesAsMember(s) {
			code = http.StatusServiceUnavailable
		}
	}
	reply(w, code, sts)
}

func servesAsMember(s Status) bool {
	switch s.State {
	case replica.ReplicaStateRunning:
		return s.Healthy
	case replica.ReplicaStateStopped:
		return true
	default:
		return false
	}
}

func (h *Host) listWorkers(w http.ResponseWriter, _ *http.Request) {
	reply(w, http.StatusOK, h.Statuses())
}
