package host_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/pki"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// servedSerial is the serial number of the certificate a worker presents to
// a new connection that trusts roots.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool) (string, error) {
	t.Helper()
	d := &tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: "w.test", NextProtos: []string{wire.ProtoRPC},
		MinVersion: tls.VersionTLS13}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func writeFiles(t *testing.T, files map[string][]byte) {
	t.Helper()
	for p, b := range files {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestARunningWorkerServesReloadedCredentialsAndKeepsThemWhenANewSetDoesNotLoad(t *testing.T) {
	f := newFixture(t)
	spec := f.spec(0)
	spec.AwaitDataDir = false
	if _, _, err := f.h.Add(spec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := f.h.WaitState(ctx, spec.Key(), replica.ReplicaStateRunning)
	if err != nil {
		t.Fatal(err)
	}
	before, _, _ := f.h.Worker(spec.Key())
	oldCA, err := os.ReadFile(f.ca)
	if err != nil {
		t.Fatal(err)
	}
	oldRoots := x509.NewCertPool()
	oldRoots.AppendCertsFromPEM(oldCA)
	first, err := servedSerial(t, st.Addr, oldRoots)
	if err != nil {
		t.Fatal(err)
	}

	// A new CA, published beside the old one, and a certificate from it.
	ca2, err := pki.NewCA("v", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := ca2.Issue([]string{"w.test"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, map[string][]byte{f.ca: append(append([]byte{}, oldCA...), ca2.CertPEM...), f.crt: crt, f.key: key})
	if err := f.h.ReloadCredentials(spec.Key()); err != nil {
		t.Fatal(err)
	}
	renewed, err := servedSerial(t, st.Addr, ca2.Pool())
	if err != nil {
		t.Fatalf("after the reload a new connection must be served with the new certificate: %v", err)
	}
	if renewed == first {
		t.Fatal("the worker presents the certificate it started with after its files changed and it was reloaded")
	}

	// A key that does not match its certificate: refused, the worker keeps
	// the set it has.
	_, otherKey, err := ca2.Issue([]string{"w.test"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, map[string][]byte{f.key: otherKey})
	if err := f.h.ReloadCredentials(spec.Key()); err == nil {
		t.Fatal("a key that does not match its certificate must be refused")
	}
	if got, err := servedSerial(t, st.Addr, ca2.Pool()); err != nil || got != renewed {
		t.Fatalf("after a refused reload the worker must serve the set it had: serial %s, %v", got, err)
	}
	after, st2, _ := f.h.Worker(spec.Key())
	if after != before || st2.State != replica.ReplicaStateRunning {
		t.Fatalf("the worker was replaced or stopped (%s): a reload must not restart it", st2.State)
	}
}
