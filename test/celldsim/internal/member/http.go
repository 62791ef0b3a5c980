package member

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/cellfleet/cellfleet/test/celldsim/internal/store"
)

// HealthPath is celld's readiness endpoint on the application listener.
const HealthPath = "/.well-known/celld/health"

// appHandler serves the application listener (CELLD_ADDR):
//
//	GET  /.well-known/celld/health  200 once recovered and not draining, else 503
//	PUT  /records/{key}             body = value; 200 only after the local fsync and MinPeerCopies peer copies
//	GET  /records/{key}             the value, from this member or else from any peer; 404 when none holds it
func (m *Member) appHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		if !m.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("PUT /records/{key}", m.handlePut)
	mux.HandleFunc("GET /records/{key}", m.handleGet)
	return mux
}

// internalHandler serves the peer and control listener (CELLD_INTERNAL_ADDR):
//
//	GET /state                    this member's State
//	PUT /internal/records/{key}   store a peer's record (fsynced before 200); 503 while draining
//	GET /internal/records/{key}   this member's copy only
//	GET /internal/snapshot        every record as JSON lines; 503 until recovered
func (m *Member) internalHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, m.state())
	})
	mux.HandleFunc("PUT /internal/records/{key}", func(w http.ResponseWriter, r *http.Request) {
		// A draining member is about to stop; on an emptyDir (Bucket) its copy
		// would vanish with it, so it must not count towards an acknowledgement.
		if m.draining.Load() {
			http.Error(w, "draining: no new copies", http.StatusServiceUnavailable)
			return
		}
		rec, ok := readRecord(w, r)
		if !ok {
			return
		}
		if err := m.store.Put(rec); err != nil {
			httpStoreError(w, err)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /internal/records/{key}", func(w http.ResponseWriter, r *http.Request) {
		v, ok := m.store.Get(r.PathValue("key"))
		if !ok {
			http.Error(w, "not held", http.StatusNotFound)
			return
		}
		io.WriteString(w, v)
	})
	mux.HandleFunc("GET /internal/snapshot", func(w http.ResponseWriter, _ *http.Request) {
		if !m.recovered.Load() {
			http.Error(w, "not recovered", http.StatusServiceUnavailable)
			return
		}
		enc := json.NewEncoder(w)
		for _, rec := range m.store.All() {
			if err := enc.Encode(rec); err != nil {
				return
			}
		}
	})
	return mux
}

// handlePut stores a record locally (fsynced), then on the peers, and
// acknowledges only when MinPeerCopies peers confirmed their own fsync.
func (m *Member) handlePut(w http.ResponseWriter, r *http.Request) {
	if !m.writes.enter() {
		http.Error(w, "draining: no new writes", http.StatusServiceUnavailable)
		return
	}
	defer m.writes.leave()
	if !m.Ready() {
		http.Error(w, "not ready: recovering or draining", http.StatusServiceUnavailable)
		return
	}
	rec, ok := readRecord(w, r)
	if !ok {
		return
	}
	if err := m.store.Put(rec); err != nil {
		httpStoreError(w, err)
		return
	}
	copies, err := m.replicate(r.Context(), rec)
	if copies < m.cfg.MinPeerCopies {
		m.log.Warn("write not acknowledged: too few peer copies", "key", rec.Key, "copies", copies, "err", err)
		http.Error(w, fmt.Sprintf("only %d of the required %d peer copies: %v", copies, m.cfg.MinPeerCopies, err),
			http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, map[string]any{"key": rec.Key, "node": m.cfg.Node, "peerCopies": copies})
}

// replicate sends rec to every peer in parallel and counts the confirmations.
func (m *Member) replicate(ctx context.Context, rec store.Record) (int, error) {
	if m.cfg.MinPeerCopies == 0 && m.cfg.Peers.Empty() {
		return 0, nil
	}
	peers, err := m.cfg.Peers.resolve(ctx, m.cfg.InternalAddr)
	if err != nil {
		return 0, err
	}
	var copies atomic.Int32
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Go(func() {
			if err := m.sendRecord(ctx, p, rec); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			copies.Add(1)
		})
	}
	wg.Wait()
	if len(peers) == 0 {
		errs = append(errs, errors.New("no peer address resolved"))
	}
	return int(copies.Load()), errors.Join(errs...)
}

func (m *Member) sendRecord(ctx context.Context, peer string, rec store.Record) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.PeerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+peer+"/internal/records/"+rec.Key,
		bytes.NewBufferString(rec.Value))
	if err != nil {
		return err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return fmt.Errorf("copy to %s: %w", peer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("copy to %s: %s: %s", peer, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// handleGet answers from the local store, else from the first peer holding it.
func (m *Member) handleGet(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if v, ok := m.store.Get(key); ok {
		io.WriteString(w, v)
		return
	}
	peers, err := m.cfg.Peers.resolve(r.Context(), m.cfg.InternalAddr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	for _, p := range peers {
		if v, err := m.fetchRecord(r.Context(), p, key); err == nil {
			io.WriteString(w, v)
			return
		}
	}
	http.Error(w, "no member holds "+key, http.StatusNotFound)
}

func (m *Member) fetchRecord(ctx context.Context, peer, key string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.PeerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+peer+"/internal/records/"+key, nil)
	if err != nil {
		return "", err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", peer, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, store.MaxValueLen+1))
	return string(b), err
}

// readRecord reads and bounds the request's record; on failure it has answered.
func readRecord(w http.ResponseWriter, r *http.Request) (store.Record, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, store.MaxValueLen+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return store.Record{}, false
	}
	rec := store.Record{Key: r.PathValue("key"), Value: string(body)}
	if err := store.Validate(rec); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return store.Record{}, false
	}
	return rec, true
}

func httpStoreError(w http.ResponseWriter, err error) {
	if errors.Is(err, store.ErrConflict) {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
