package mux_test

import (
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/mux"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// serialOf is the serial number of a certificate.
func serialOf(t *testing.T, c tls.Certificate) *big.Int {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber
}

func TestAPortPresentsCredentialsStoredWhileItServesAndKeepsItsStreams(t *testing.T) {
	v := newVolumeCA(t, "vol")
	oldCert, newCert := v.cert(t, sanR0), v.cert(t, sanR0)
	const newToken = "fedcba9876543210fedcba9876543210"
	creds, err := mux.NewCredentialSet(mux.Credentials{Certificate: oldCert, CA: v.pool, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	r0 := startPortWith(t, creds)
	r1 := startPort(t, v, sanR1)

	before, err := dial(t, r0.addr(), rpcConfig(v, sanR0))
	if err != nil {
		t.Fatal(err)
	}
	if hello, call, err := helloAndCall(t, before, token); err != nil || hello.Status != wire.StatusOK || call.Status != wire.StatusOK {
		t.Fatalf("a stream opened with the first credentials must be served: hello %v, call %v, %v", hello.Status, call.Status, err)
	}

	if err := creds.Store(mux.Credentials{Certificate: newCert, CA: v.pool, Token: newToken}); err != nil {
		t.Fatal(err)
	}
	if err := creds.Store(mux.Credentials{CA: v.pool, Token: newToken}); err == nil {
		t.Fatal("a set without a certificate must be refused")
	}

	after, err := dial(t, r0.addr(), rpcConfig(v, sanR0))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := after.ConnectionState().PeerCertificates[0].SerialNumber, serialOf(t, newCert); got.Cmp(want) != 0 {
		t.Fatalf("a connection opened after the swap got certificate %x, want the stored one %x", got, want)
	}
	if hello, _, err := helloAndCall(t, after, token); err != nil || hello.Status != wire.StatusUnauthorized {
		t.Fatalf("a hello with the replaced token must be refused: %v, %v", hello.Status, err)
	}
	again, err := dial(t, r0.addr(), rpcConfig(v, sanR0))
	if err != nil {
		t.Fatal(err)
	}
	if hello, call, err := helloAndCall(t, again, newToken); err != nil || hello.Status != wire.StatusOK || call.Status != wire.StatusOK {
		t.Fatalf("a hello with the stored token must be served: %v, %v, %v", hello.Status, call.Status, err)
	}

	// The stream opened before the swap is still served.
	_ = before.SetDeadline(time.Now().Add(deadline))
	if err := wire.WriteFrame(before, wire.AppendCall(&wire.Call{ID: 43, Ops: []wire.Op{{Kind: wire.KindGetattr, Ino: 1}}})); err != nil {
		t.Fatal(err)
	}
	if rep, err := readReply(before); err != nil || rep.Status != wire.StatusOK || rep.ID != 43 {
		t.Fatalf("a stream opened before the swap was dropped: %+v, %v", rep, err)
	}

	// Raft dials present the stored certificate to the peer.
	accepted := acceptOne(r1)
	out, err := r0.mux.StreamLayer().Dial(raft.ServerAddress(sanR1+"@"+r1.addr()), deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := out.Write([]byte("x")); err != nil { // completes the client's side of the handshake
		t.Fatal(err)
	}
	select {
	case in := <-accepted:
		defer in.Close()
		got := in.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber
		if want := serialOf(t, newCert); got.Cmp(want) != 0 {
			t.Fatalf("a raft dial after the swap presented certificate %x, want the stored one %x", got, want)
		}
	case <-time.After(deadline):
		t.Fatal("the peer did not accept the raft dial")
	}
}
