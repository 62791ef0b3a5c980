package host

// The admin API: the host's mutations (add and remove workers, change a
// volume's members, take a checkpoint), the digest and the long poll. It is
// served only on the local unix socket (ListenAdmin), whose file mode and
// directory make the kernel the authority: only the host's own user (root
// on a node) can connect. The decision and what Kubernetes mode will use
// instead are in docs/decisions/0003-host-admin-authority.md.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
)

// maxBody bounds an admin request body: a worker spec is a few KiB.
const maxBody = 64 << 10

// AdminHandler serves the whole API under /v1, mutations included, for the
// admin socket. Every request holds one of the host's shared HTTP operation
// slots; past the bound it is answered 503 with an Unavailable condition.
func (h *Host) AdminHandler() http.Handler {
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/workers", h.listWorkers)
	api.HandleFunc("POST /v1/workers", h.addWorker)
	api.HandleFunc("GET /v1/workers/{volume}/{replica}", h.getWorker)
	api.HandleFunc("DELETE /v1/workers/{volume}/{replica}", h.removeWorker)
	api.HandleFunc("POST /v1/workers/{volume}/{replica}/members", h.addMember)
	api.HandleFunc("DELETE /v1/workers/{volume}/{replica}/members/{id}", h.removeMember)
	api.HandleFunc("POST /v1/workers/{volume}/{replica}/checkpoint", h.checkpoint)
	api.HandleFunc("POST /v1/workers/{volume}/{replica}/capacity", h.growCapacity)
	api.HandleFunc("POST /v1/workers/{volume}/{replica}/transfer/{id}", h.transferCoordinator)
	api.HandleFunc("GET /v1/workers/{volume}/{replica}/digest", h.digest)
	mux := http.NewServeMux()
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

// badBody answers a request body that could not be decoded: 413 past
// maxBody, 400 otherwise.
func badBody(w http.ResponseWriter, err error) {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		fail(w, http.StatusRequestEntityTooLarge, err)
		return
	}
	fail(w, http.StatusBadRequest, err)
}

func (h *Host) addWorker(w http.ResponseWriter, r *http.Request) {
	spec, err := decodeWorkerSpec(r.Body)
	if err != nil {
		badBody(w, err)
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
	wait, err := decodeWait(r.URL.Query())
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	if wait.State == "" {
		if _, st, ok := h.Worker(key); ok {
			reply(w, http.StatusOK, st)
			return
		}
		fail(w, http.StatusNotFound, fmt.Errorf("no worker %s", key))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait.Timeout)
	defer cancel()
	st, err := h.WaitState(ctx, key, wait.State)
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
	p, err := decodeMember(r.Body)
	if err != nil {
		badBody(w, err)
		return
	}
	wk := h.running(w, r)
	if wk == nil {
		return
	}
	// The node's own tool waits for the whole catch-up (one call, as
	// before); a 503 past it says to ask again, the non-voter staying.
	if err := wk.AddReplica(p, replica.MembershipTimeout); err != nil {
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

// MaxWaitTimeout bounds a long poll's ?timeout.
const MaxWaitTimeout = 5 * time.Minute

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
