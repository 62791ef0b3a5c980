package host

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/fsm"
	"github.com/cellfleet/cellfleet/internal/replica/mux"
)

// WorkerSpec describes one worker to host. It is the unit of the standalone
// configuration file and of the host's admin API.
type WorkerSpec struct {
	Volume        string         `json:"volume"`
	Replica       string         `json:"replica"`
	Generation    uint64         `json:"generation"`
	Listen        string         `json:"listen"`
	Self          replica.Peer   `json:"self"`
	Peers         []replica.Peer `json:"peers"`
	Bootstrap     bool           `json:"bootstrap"`
	DataDir       string         `json:"dataDir"`
	CapacityBytes uint64         `json:"capacityBytes"`
	CAFile        string         `json:"caFile"`
	CertFile      string         `json:"certFile"`
	KeyFile       string         `json:"keyFile"`
	TokenFile     string         `json:"tokenFile"`
	Timing        replica.Timing `json:"timing"`
	// MaxSessions bounds the volume's exactly-once table (0: the state
	// machine's default, 256). Every replica of a volume must use the same
	// value: eviction is part of the replicated state.
	MaxSessions int `json:"maxSessions,omitempty"`
	// AwaitDataDir makes the start wait (holding its start slot) until the
	// backing volume's bind is visible at DataDir in this host's own mount
	// namespace (publication.WaitForBind), as the Kubernetes mode waits for
	// the local-CSI publication to propagate. Without it the host creates
	// the directory.
	AwaitDataDir bool `json:"awaitDataDir,omitempty"`
	// ClaimUID, PV and Node name the storage the replica runs on, in
	// Kubernetes mode: its backing claim's UID, the PersistentVolume bound
	// to it and the node. The host's history records them and refuses a
	// recorded replica given other storage (history.go). Empty in
	// standalone mode.
	ClaimUID string `json:"claimUID,omitempty"`
	PV       string `json:"pv,omitempty"`
	Node     string `json:"node,omitempty"`
}

// MaxSessionsLimit bounds WorkerSpec.MaxSessions: the state machine's own
// bound on the replicated session table (a spec past it could never commit).
const MaxSessionsLimit = fsm.MaxSessionsLimit

// Key identifies a worker on a host.
func (s WorkerSpec) Key() string { return s.Volume + "/" + s.Replica }

// Validate checks the spec's own fields (files are read at start).
func (s WorkerSpec) Validate() error {
	var errs []error
	for name, v := range map[string]string{"volume": s.Volume, "replica": s.Replica, "listen": s.Listen,
		"dataDir": s.DataDir, "caFile": s.CAFile, "certFile": s.CertFile, "keyFile": s.KeyFile, "tokenFile": s.TokenFile} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	if strings.ContainsAny(s.Volume+s.Replica, "/\\ ") {
		errs = append(errs, errors.New("volume and replica names must not contain '/', '\\' or spaces"))
	}
	if s.Generation == 0 {
		errs = append(errs, errors.New("generation must be at least 1"))
	}
	if s.MaxSessions < 0 || s.MaxSessions > MaxSessionsLimit {
		errs = append(errs, fmt.Errorf("maxSessions must be between 1 and %d (0 for the default), got %d", MaxSessionsLimit, s.MaxSessions))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("worker %s: %w", s.Key(), err)
	}
	return nil
}

// material reads the spec's certificate, CA and token. The CA file may
// hold several certificates; each of them is trusted.
func (s WorkerSpec) material() (mux.Credentials, error) {
	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		return mux.Credentials{}, fmt.Errorf("load certificate of %s: %w", s.Key(), err)
	}
	caPEM, err := os.ReadFile(s.CAFile)
	if err != nil {
		return mux.Credentials{}, fmt.Errorf("read CA of %s: %w", s.Key(), err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return mux.Credentials{}, fmt.Errorf("CA file %s holds no certificate", s.CAFile)
	}
	tok, err := os.ReadFile(s.TokenFile)
	if err != nil {
		return mux.Credentials{}, fmt.Errorf("read token of %s: %w", s.Key(), err)
	}
	return mux.Credentials{Certificate: cert, CA: pool, Token: strings.TrimSpace(string(tok))}, nil
}
