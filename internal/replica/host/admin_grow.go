package host

// Admin routes for the coordinator's own changes that are not membership:
// growing the volume's capacity and handing the coordinator's role to
// another member. Like every mutation they are served only on the admin
// socket (docs/decisions/0003-host-admin-authority.md); in Kubernetes mode
// the growth comes from the VolumeReplica's spec instead.

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// CapacityRequest is the body of POST .../capacity.
type CapacityRequest struct {
	CapacityBytes uint64 `json:"capacityBytes"`
}

// CapacityReply answers it with the capacity in force.
type CapacityReply struct {
	CapacityBytes uint64 `json:"capacityBytes"`
}

// decodeCapacity reads the body of POST .../capacity.
func decodeCapacity(r io.Reader) (uint64, error) {
	var req CapacityRequest
	if err := decodeStrict(r, &req); err != nil {
		return 0, fmt.Errorf("capacity: %w", err)
	}
	if req.CapacityBytes == 0 || req.CapacityBytes > wire.MaxFileSize {
		return 0, fmt.Errorf("capacity: capacityBytes must be 1 to %d", uint64(wire.MaxFileSize))
	}
	return req.CapacityBytes, nil
}

func (h *Host) growCapacity(w http.ResponseWriter, r *http.Request) {
	want, err := decodeCapacity(r.Body)
	if err != nil {
		badBody(w, err)
		return
	}
	wk := h.running(w, r)
	if wk == nil {
		return
	}
	got, err := wk.GrowCapacity(want)
	switch {
	case errors.Is(err, replica.ErrShrink):
		fail(w, http.StatusConflict, err)
	case err != nil:
		fail(w, memberCode(err), err)
	default:
		reply(w, http.StatusOK, CapacityReply{CapacityBytes: got})
	}
}

func (h *Host) transferCoordinator(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := validMember(replica.Peer{ID: id, ServerName: "x", Address: "x:1"}); err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	wk := h.running(w, r)
	if wk == nil {
		return
	}
	if err := wk.TransferCoordinator(id); err != nil {
		fail(w, memberCode(err), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
