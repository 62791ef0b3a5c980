package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"syscall"

	"github.com/cellfleet/cellfleet/test/storagesim/api"
)

// maxVerifyBody bounds a verify request (a ledger of a long scenario is a few
// hundred thousand entries of ~30 bytes).
const maxVerifyBody = 64 << 20

func (w *workload) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathHealth, func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST "+api.PathAppend, func(rw http.ResponseWriter, r *http.Request) { w.serveOp(rw, r, api.KindRecord) })
	mux.HandleFunc("POST "+api.PathFile, func(rw http.ResponseWriter, r *http.Request) { w.serveOp(rw, r, api.KindFile) })
	mux.HandleFunc("GET "+api.PathStats, func(rw http.ResponseWriter, _ *http.Request) { writeJSON(rw, w.stats()) })
	mux.HandleFunc("GET "+api.PathStatfs, func(rw http.ResponseWriter, _ *http.Request) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(w.dir, &st); err != nil {
			http.Error(rw, fmt.Sprintf("statfs %s: %v", w.dir, err), http.StatusServiceUnavailable)
			return
		}
		writeJSON(rw, api.Statfs{TotalBytes: st.Blocks * uint64(st.Bsize), FreeBytes: st.Bavail * uint64(st.Bsize)})
	})
	mux.HandleFunc("POST "+api.PathVerify, func(rw http.ResponseWriter, r *http.Request) {
		var req api.VerifyRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, maxVerifyBody)).Decode(&req); err != nil {
			http.Error(rw, "verify request: "+err.Error(), http.StatusBadRequest)
			return
		}
		rep, err := w.verify(req)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(rw, rep)
	})
	return mux
}

// serveOp answers 200 with the Ack only once the operation is durable, and
// 503 with the error otherwise: a failure is reported, never acknowledged.
func (w *workload) serveOp(rw http.ResponseWriter, r *http.Request, kind api.Kind) {
	payload, err := io.ReadAll(io.LimitReader(r.Body, maxPayload+1))
	if err != nil {
		http.Error(rw, "read payload: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(payload) == 0 || len(payload) > maxPayload {
		http.Error(rw, fmt.Sprintf("payload of %d bytes: must be 1 to %d", len(payload), maxPayload), http.StatusBadRequest)
		return
	}
	ack, err := w.do(kind, payload)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(rw, ack)
}

func writeJSON(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(v)
}
