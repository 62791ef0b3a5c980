package loopowner

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"sync"
	"time"

	"github.com/cellfleet/cellfleet/internal/mountowner/api"
)

// Volume-context and secret keys, as the replicated driver reads them
// (duplicated from internal/csi/replicated so this package stays a leaf).
const (
	contextEndpoints = "replicated.storage.eric.dev/endpoints"
	secretCA         = "ca.crt"
	secretToken      = "token"
)

// TestToken is the bearer token the test credentials carry.
const TestToken = "loopowner-test-token-0123456789"

var (
	caOnce sync.Once
	caPEM  string
)

// testCA is a throwaway self-signed CA certificate (the owner's request
// validation requires a parseable one; the loopback mount ignores it).
func testCA() string {
	caOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "loopowner test CA"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
			BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
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
