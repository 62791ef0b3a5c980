package host

// Credentials that change while a worker runs (docs/replica-engine.md,
// "Transport and trust"): the volume controller renews each replica's
// certificate two thirds into its life and the host's Kubernetes mode
// rewrites the spec's files when the replica's Secret changed. Reloading
// reads those files again and swaps the worker's credential set: the next
// handshake presents the new certificate and trusts the new CA, the next
// client hello is checked against the new token, and the worker, its Raft
// group and every established connection (a mount owner's stream, a peer's
// Raft connection) go on untouched. A set that does not load is refused
// and the worker keeps serving on the one it has.

import (
	"fmt"

	"github.com/cellfleet/cellfleet/internal/replica/mux"
)

// ReloadCredentials reads a hosted worker's certificate, CA and token files
// again and makes them its credentials from the next connection on. A
// worker not yet built loads the files when it is.
func (h *Host) ReloadCredentials(key string) error {
	h.mu.Lock()
	hw, ok := h.workers[key]
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("no worker %s", key)
	}
	hw.credMu.Lock()
	built := hw.creds != nil
	hw.credMu.Unlock()
	if !built {
		return nil
	}
	if _, err := hw.loadCredentials(); err != nil {
		return fmt.Errorf("reload credentials of %s (the worker keeps the ones it has): %w", key, err)
	}
	h.log.Info("worker credentials reloaded", "volume", hw.spec.Volume, "replica", hw.spec.Replica)
	return nil
}

// loadCredentials reads the spec's files into the worker's credential set,
// creating the set on the first load.
func (hw *hosted) loadCredentials() (*mux.CredentialSet, error) {
	hw.credMu.Lock()
	defer hw.credMu.Unlock()
	c, err := hw.spec.material()
	if err != nil {
		return hw.creds, err
	}
	if hw.creds == nil {
		hw.creds, err = mux.NewCredentialSet(c)
		return hw.creds, err
	}
	return hw.creds, hw.creds.Store(c)
}
