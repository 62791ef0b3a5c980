package member

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cellfleet/cellfleet/test/celldsim/internal/store"
)

// retryEvery paces recovery attempts while no recovered peer answers.
const retryEvery = 500 * time.Millisecond

// snapshotTimeout bounds one copy of a peer's records (a whole log, so longer
// than a single peer call).
const snapshotTimeout = 30 * time.Second

// recover brings the member to the recovered state. A retained disk is
// already recovered by store.Open's replay; it also catches up from the peers
// it can reach (best effort) so records written while it was down gain a
// copy. A fresh disk must copy from a recovered peer first; only when no
// recovered peer answers within BootstrapWindow does it start empty, as the
// members of a new fleet do.
func (m *Member) recover(ctx context.Context) {
	if !m.fresh {
		if peer, n, err := m.copyFromPeers(ctx, false); err == nil {
			m.log.Info("caught up from peers", "peer", peer, "copied", n)
		}
		m.markRecovered("")
		return
	}
	deadline := time.Now().Add(m.cfg.BootstrapWindow)
	for {
		peer, n, err := m.copyFromPeers(ctx, true)
		if err == nil {
			m.log.Info("fresh disk recovered from peer", "peer", peer, "copied", n)
			m.markRecovered(peer)
			return
		}
		if time.Now().After(deadline) {
			m.log.Warn("no recovered peer within the bootstrap window: starting a new fleet member empty",
				"window", m.cfg.BootstrapWindow.String(), "lastErr", err)
			m.markRecovered("")
			return
		}
		m.log.Info("fresh disk waits for a recovered peer", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryEvery):
		}
	}
}

// markRecovered persists the identity (the disk is no longer fresh) and opens
// the health gate.
func (m *Member) markRecovered(from string) {
	path := filepath.Join(m.cfg.Watch, IdentityName)
	if err := writeFileSync(path, []byte(m.cfg.Node+"\n")); err != nil {
		m.log.Error("cannot persist identity: staying unhealthy", "err", err)
		return
	}
	m.recoveredFrom.Store(from)
	m.recovered.Store(true)
	m.log.Info("recovered: healthy", "records", m.store.Len())
}

// copyFromPeers copies every record of the peers that report themselves
// recovered. With needOne it fails unless at least one such peer answered.
func (m *Member) copyFromPeers(ctx context.Context, needOne bool) (string, int, error) {
	peers, err := m.cfg.Peers.resolve(ctx, m.cfg.InternalAddr)
	if err != nil {
		return "", 0, err
	}
	var first string
	copied := 0
	var errs []error
	for _, p := range peers {
		n, err := m.copyFrom(ctx, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		copied += n
		if first == "" {
			first = p
		}
	}
	if first == "" && needOne {
		if len(peers) == 0 {
			return "", 0, errors.New("no peer address resolved")
		}
		return "", 0, fmt.Errorf("no recovered peer answered: %w", errors.Join(errs...))
	}
	return first, copied, nil
}

// copyFrom streams one peer's records into the store, only if that peer is
// itself recovered (an unrecovered peer's view is incomplete).
func (m *Member) copyFrom(ctx context.Context, peer string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+peer+"/internal/snapshot", nil)
	if err != nil {
		return 0, err
	}
	resp, err := m.snapshots.Do(req)
	if err != nil {
		return 0, fmt.Errorf("snapshot of %s: %w", peer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("snapshot of %s: %s", peer, resp.Status)
	}
	var missing []store.Record
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), store.MaxKeyLen+store.MaxValueLen+1024)
	for sc.Scan() {
		var rec store.Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return 0, fmt.Errorf("snapshot of %s: decode record: %w", peer, err)
		}
		if _, held := m.store.Get(rec.Key); !held {
			missing = append(missing, rec)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("snapshot of %s: %w", peer, err)
	}
	// One fsync for the whole copy: recovery of thousands of records must not
	// pay one fsync each.
	if err := m.store.PutAll(missing); err != nil {
		return 0, fmt.Errorf("store the records of %s: %w", peer, err)
	}
	return len(missing), nil
}

// writeFileSync writes a small file and fsyncs it and its directory.
func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
