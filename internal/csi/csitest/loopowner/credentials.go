package loopowner

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/cellfleet/cellfleet/internal/mountowner/api"
	"github.com/cellfleet/cellfleet/internal/replica/pki"
)

// Volume-context and secret keys, as the replicated driver reads them
// (duplicated from internal/csi/replicated so this package stays a leaf).
const (
	contextEndpoints = "replicated.storage.eric.dev/endpoints"
	secretCA         = "ca.crt"
	secretToken      = "mount-token"
)

// TestToken is the bearer token the test credentials carry.
const TestToken = "loopowner-test-token-0123456789"

var (
	caOnce sync.Once
	caPEM  string
)

// testCA is a throwaway CA certificate from the one CA builder (the owner's
// request validation requires a parseable one; the loopback mount ignores it).
func testCA() string {
	caOnce.Do(func() {
		ca, err := pki.NewCA("loopowner test", 24*time.Hour)
		if err != nil {
			panic(fmt.Errorf("loopowner test CA: %w", err))
		}
		caPEM = string(ca.CertPEM)
	})
	return caPEM
}

// VolumeContext is what a CreateVolume of the replicated driver publishes
// for volume id: three worker endpoints.
func VolumeContext(id string) map[string]string {
	eps := []api.Endpoint{
		{ID: "r0", Address: "127.0.0.1:20001", ServerName: id + "-r0.cellfleet-system.svc"},
		{ID: "r1", Address: "127.0.0.1:20002", ServerName: id + "-r1.cellfleet-system.svc"},
		{ID: "r2", Address: "127.0.0.1:20003", ServerName: id + "-r2.cellfleet-system.svc"},
	}
	raw, _ := json.Marshal(eps)
	return map[string]string{contextEndpoints: string(raw)}
}

// Secrets are node-stage secrets of a volume: its CA and token.
func Secrets() map[string]string {
	return map[string]string{secretCA: testCA(), secretToken: TestToken}
}
