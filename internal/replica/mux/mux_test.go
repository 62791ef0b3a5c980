package mux_test

import (
	"crypto/tls"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

func TestALPNRoutesRaftPeersToTheStreamLayerAndClientsToTheRPCService(t *testing.T) {
	v := newVolumeCA(t, "vol")
	r0 := startPort(t, v, sanR0)
	r1 := startPort(t, v, sanR1)

	// A client stream (ALPN cellfleet-rpc/1) reaches the RPC handler.
	c, err := dial(t, r0.addr(), rpcConfig(v, sanR0))
	if err != nil {
		t.Fatalf("a client with the volume's CA must connect: %v", err)
	}
	if got := c.ConnectionState().NegotiatedProtocol; got != wire.ProtoRPC {
		t.Fatalf("negotiated %q, want %q", got, wire.ProtoRPC)
	}
	hello, call, err := helloAndCall(t, c, token)
	if err != nil || hello.Status != wire.StatusOK || call.Status != wire.StatusOK || call.ID != 42 {
		t.Fatalf("an authenticated call must be answered by the RPC service: hello %v, call %+v, %v", hello.Status, call, err)
	}
	if n := r0.calls.Load(); n != 1 {
		t.Fatalf("the RPC handler saw %d calls, want 1", n)
	}

	// A peer (ALPN cellfleet-raft/1) dialed through r1's stream layer reaches
	// r0's raft Accept, and bytes flow both ways.
	accepted := acceptOne(r0)
	out, err := r1.mux.StreamLayer().Dial(raft.ServerAddress(sanR0+"@"+r0.addr()), deadline)
	if err != nil {
		t.Fatalf("a replica of the volume must reach its peer's raft: %v", err)
	}
	defer out.Close()
	var in interface {
		Read([]byte) (int, error)
		Close() error
	}
	select {
	case in = <-accepted:
	case <-time.After(deadline):
		t.Fatal("the raft stream layer did not receive the peer's connection")
	}
	defer in.Close()
	if _, err := out.Write([]byte("raft")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(in, buf); err != nil || string(buf) != "raft" {
		t.Fatalf("raft bytes did not arrive intact: %q %v", buf, err)
	}
	if n := r0.calls.Load(); n != 1 {
		t.Fatalf("a raft connection reached the RPC handler (%d calls)", n)
	}

	// Neither protocol offered: the handshake fails, nothing is routed.
	other := rpcConfig(v, sanR0)
	other.NextProtos = []string{"h2"}
	if c, err := dial(t, r0.addr(), other); err == nil {
		if err := closedByPeer(c); err != nil {
			t.Fatalf("a connection without a known protocol must be closed: %v", err)
		}
	}
}

func TestRaftPeersAreVerifiedByTheVolumesCAAndTheirSAN(t *testing.T) {
	v := newVolumeCA(t, "vol")
	foreign := newVolumeCA(t, "other")
	r0 := startPort(t, v, sanR0)
	cases := []struct {
		name   string
		certs  []tls.Certificate
		accept bool
	}{
		{"replica of the volume", []tls.Certificate{v.cert(t, sanR1)}, true},
		{"same CA but not a replica", []tls.Certificate{v.cert(t, sanOther)}, false},
		{"no client certificate", nil, false},
		{"replica SAN from a foreign CA", []tls.Certificate{foreign.cert(t, sanR1)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			accepted := acceptOne(r0)
			c, err := dial(t, r0.addr(), &tls.Config{RootCAs: v.pool, ServerName: sanR0, Certificates: tc.certs,
				NextProtos: []string{wire.ProtoRaft}, MinVersion: tls.VersionTLS13})
			if tc.accept {
				if err != nil {
					t.Fatalf("a replica of the volume must connect: %v", err)
				}
				select {
				case in := <-accepted:
					in.Close()
				case <-time.After(deadline):
					t.Fatal("a verified replica was not handed to raft")
				}
				return
			}
			if err == nil {
				if err := closedByPeer(c); err != nil {
					t.Fatalf("a peer that is not a verified replica of the volume must be refused: %v", err)
				}
			}
			// Unblock the pending Accept with a real replica so the
			// check proves the rejected connection never reached raft.
			good, err := dial(t, r0.addr(), &tls.Config{RootCAs: v.pool, ServerName: sanR0, Certificates: []tls.Certificate{v.cert(t, sanR1)},
				NextProtos: []string{wire.ProtoRaft}, MinVersion: tls.VersionTLS13})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case in := <-accepted:
				defer in.Close()
				if got := in.RemoteAddr().String(); got != good.LocalAddr().String() {
					t.Fatalf("raft received the rejected connection from %s", got)
				}
			case <-time.After(deadline):
				t.Fatal("raft received nothing after the rejection")
			}
		})
	}
}

func TestDialingAPeerVerifiesItsCAAndTheSANTheConfigurationNames(t *testing.T) {
	v := newVolumeCA(t, "vol")
	foreign := newVolumeCA(t, "other")
	r1 := startPort(t, v, sanR1)
	genuine := startPort(t, v, sanR0)
	impostor := startPort(t, foreign, sanR0) // right SAN, wrong CA
	cases := []struct {
		name string
		addr raft.ServerAddress
		want string // "" = must connect
	}{
		{"the replica the configuration names", raft.ServerAddress(sanR0 + "@" + genuine.addr()), ""},
		{"a port presenting another replica's SAN", raft.ServerAddress(sanOther + "@" + genuine.addr()), "certificate is valid for"},
		{"a port with a certificate from a foreign CA", raft.ServerAddress(sanR0 + "@" + impostor.addr()), "unknown authority"},
		{"an address without a SAN", raft.ServerAddress(genuine.addr()), "no replica SAN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				acceptOne(genuine)
			}
			c, err := r1.mux.StreamLayer().Dial(tc.addr, deadline)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("dialing the configured replica must succeed: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatalf("dialing %s must fail verification", tc.addr)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestClientsOfAForeignCAAreRejected(t *testing.T) {
	v := newVolumeCA(t, "vol")
	foreign := newVolumeCA(t, "other")
	r0 := startPort(t, v, sanR0)
	// A client presenting a certificate from a foreign CA: refused at the
	// handshake, never reaches the token check. (GetClientCertificate forces
	// the certificate out; Go's client would otherwise withhold a
	// certificate the server's CA list does not accept.)
	cfg := rpcConfig(v, sanR0)
	bad := foreign.cert(t, "client")
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &bad, nil }
	if c, err := dial(t, r0.addr(), cfg); err == nil {
		if _, _, err := helloAndCall(t, c, token); err == nil {
			t.Fatal("a client certificate from a foreign CA must be refused")
		}
	}
	// A client trusting only a foreign CA refuses the worker.
	if _, err := dial(t, r0.addr(), rpcConfig(foreign, sanR0)); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("a client that does not trust the volume's CA must refuse the worker, got %v", err)
	}
	if n := r0.calls.Load(); n != 0 {
		t.Fatalf("the RPC handler ran %d calls for rejected connections", n)
	}
}
