package volume_test

// Certificate renewal (docs/volume-controller.md, "Certificate renewal")
// with lifetimes of seconds: a replica's certificate is replaced two thirds
// into its life, by the same CA, while the old one is still valid, and the
// reconcile asks to run again for that moment. A certificate issued under a
// longer validity is replaced at once.

import (
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
	"github.com/cellfleet/cellfleet/internal/replica/pki"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// replicaCert is the certificate in a replica's Secret.
func (fx *fixture) replicaCert(replica string) *x509.Certificate {
	fx.t.Helper()
	s, ok := fx.secret(fx.ns, replica+"-tls")
	if !ok {
		fx.t.Fatalf("no Secret of replica %s", replica)
	}
	c, err := pki.ParseCertificate(s.Data[storagev1alpha1.SecretKeyCert])
	if err != nil {
		fx.t.Fatalf("certificate of replica %s: %v", replica, err)
	}
	return c
}

// volumeRoots is the volume's CA as a pool, and its PEM.
func (fx *fixture) volumeRoots(volumeName string) (*x509.CertPool, string) {
	fx.t.Helper()
	s, ok := fx.secret(fx.managerNS, "rv-"+volumeName+"-ca")
	if !ok {
		fx.t.Fatalf("no CA Secret of volume %s", volumeName)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data[storagev1alpha1.SecretKeyCACert]) {
		fx.t.Fatalf("the CA Secret of %s holds no certificate", volumeName)
	}
	return roots, string(s.Data[storagev1alpha1.SecretKeyCACert])
}

// validAt checks that cert chains to roots at moment at.
func validAt(cert *x509.Certificate, roots *x509.CertPool, at time.Time) error {
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: cert.DNSNames[0], CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// life is how long cert was issued for.
func life(cert *x509.Certificate) time.Duration {
	return cert.NotAfter.Sub(cert.NotBefore.Add(pki.ClockSkew))
}

func TestReplicaCertificatesAreRenewedTwoThirdsIntoTheirLifeWhileTheOldOnesAreValid(t *testing.T) {
	const validity = 9 * time.Second
	fx := newFixture(t)
	for _, n := range []string{"a", "b", "c"} {
		fx.node(n, "", true)
	}
	// Made under the longest validity the flag allows: the certificates an
	// earlier, longer setting left.
	fx.opts.CertificateValidity = volume.MaxCertificateValidity
	fx.restart()
	rv := fx.volume(3)
	fx.converge(rv.Name)
	roots, caPEM := fx.volumeRoots(rv.Name)
	long := map[string]*x509.Certificate{}
	for _, vr := range fx.replicas(rv.Name) {
		long[vr.Name] = fx.replicaCert(vr.Name)
	}

	fx.opts.CertificateValidity = validity
	fx.restart()
	fx.converge(rv.Name)
	first := map[string]*x509.Certificate{}
	for name, old := range long {
		c := fx.replicaCert(name)
		if c.SerialNumber.Cmp(old.SerialNumber) == 0 || life(c) > validity+time.Second {
			t.Fatalf("replica %s kept a certificate valid until %s: one that outlives the validity of %s must be replaced at once",
				name, c.NotAfter, validity)
		}
		first[name] = c
	}
	res, err := fx.reconcile(rv.Name)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > validity*2/3+time.Second {
		t.Fatalf("reconcile asks to run again in %s: the renewal is due within %s", res.RequeueAfter, validity*2/3)
	}

	// Reconcile until every certificate was replaced; each replacement
	// must come at two thirds of the old one's life, before it expires.
	renewed := map[string]time.Time{}
	poll.Until(t, validity, "every replica certificate renewed", func() error {
		if _, err := fx.reconcile(rv.Name); err != nil {
			return err
		}
		now := time.Now()
		for name, old := range first {
			if _, done := renewed[name]; !done && fx.replicaCert(name).SerialNumber.Cmp(old.SerialNumber) != 0 {
				renewed[name] = now
			}
		}
		if len(renewed) < len(first) {
			return fmt.Errorf("%d of %d renewed", len(renewed), len(first))
		}
		return nil
	})
	for name, old := range first {
		c := fx.replicaCert(name)
		if due := pki.RenewalDue(old); renewed[name].Before(due) {
			t.Errorf("replica %s renewed at %s, before two thirds of its life (%s)", name, renewed[name], due)
		}
		if !renewed[name].Before(old.NotAfter) {
			t.Errorf("replica %s renewed at %s, after its certificate expired at %s", name, renewed[name], old.NotAfter)
		}
		if err := validAt(old, roots, renewed[name]); err != nil {
			t.Errorf("the old certificate of %s is not valid when the new one appears: no overlap: %v", name, err)
		}
		if err := validAt(c, roots, time.Now()); err != nil {
			t.Errorf("the renewed certificate of %s does not chain to the volume's CA: %v", name, err)
		}
		if life(c) < validity-time.Second || life(c) > validity+time.Second {
			t.Errorf("the renewed certificate of %s lives %s, want %s", name, life(c), validity)
		}
		if fmt.Sprint(c.DNSNames) != fmt.Sprint(old.DNSNames) {
			t.Errorf("the renewed certificate of %s names %v, the old one %v", name, c.DNSNames, old.DNSNames)
		}
	}
	if _, pem := fx.volumeRoots(rv.Name); pem != caPEM {
		t.Error("the volume's CA changed: renewal must keep it")
	}
}
