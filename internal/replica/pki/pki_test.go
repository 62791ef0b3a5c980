package pki

import (
	"crypto/x509"
	"testing"
	"time"
)

func TestIssuedCertificatesVerifyOnlyAgainstTheirVolumesCA(t *testing.T) {
	ca, err := NewCA("a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("b", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueTLS([]string{"a-r0.test"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	opts := x509.VerifyOptions{DNSName: "a-r0.test", Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	if _, err := leaf.Verify(opts); err != nil {
		t.Fatalf("a replica certificate must verify against its volume's CA: %v", err)
	}
	opts.Roots = other.Pool()
	if _, err := leaf.Verify(opts); err == nil {
		t.Fatalf("a replica certificate verified against another volume's CA")
	}
	reloaded, err := LoadCA(ca.CertPEM, ca.KeyPEM)
	if err != nil || !reloaded.Cert.Equal(ca.Cert) {
		t.Fatalf("CA does not survive a PEM round trip: %v", err)
	}
	if _, _, err := ca.Issue(nil, time.Hour); err == nil {
		t.Fatalf("a certificate without a SAN must be refused")
	}
}

func TestRenewalIsDueTwoThirdsIntoTheLifeACertificateWasIssuedFor(t *testing.T) {
	ca, err := NewCA("a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	certPEM, _, err := ca.Issue([]string{"a-r0.test"}, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	due := RenewalDue(cert)
	// NotBefore and NotAfter are whole seconds: allow one either side.
	lo, hi := before.Add(60*time.Second-time.Second), after.Add(60*time.Second+time.Second)
	if due.Before(lo) || due.After(hi) {
		t.Fatalf("renewal due at %s, want two thirds into a 90s life issued between %s and %s", due, before, after)
	}
	if _, err := ParseCertificate([]byte("not PEM")); err == nil {
		t.Fatal("a non-PEM certificate must be refused")
	}
}
