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
