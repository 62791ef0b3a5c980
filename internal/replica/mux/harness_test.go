package mux_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/mux"
	"github.com/cellfleet/cellfleet/internal/replica/pki"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// The volume every test port belongs to: replicas vol-r0.test and
// vol-r1.test, certificates from the volume's own CA.
const (
	sanR0    = "vol-r0.test"
	sanR1    = "vol-r1.test"
	sanOther = "vol-r9.test" // same CA, not a replica of the volume
	token    = "0123456789abcdef0123456789abcdef"
	validFor = time.Hour
	deadline = 5 * time.Second
)

type volumeCA struct {
	ca   *pki.CA
	pool *x509.CertPool
}

func newVolumeCA(t *testing.T, volume string) volumeCA {
	t.Helper()
	ca, err := pki.NewCA(volume, validFor)
	if err != nil {
		t.Fatal(err)
	}
	return volumeCA{ca: ca, pool: ca.Pool()}
}

func (v volumeCA) cert(t *testing.T, san string) tls.Certificate {
	t.Helper()
	c, err := v.ca.IssueTLS([]string{san}, validFor)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// port is one worker's listener with an RPC service counting the calls its
// handler saw.
type port struct {
	mux   *mux.Mux
	rpc   *mux.RPCServer
	calls atomic.Int64
}

func isReplica(san string) bool { return san == sanR0 || san == sanR1 }

// resolve maps "SAN@host:port" raft addresses, as the worker does.
func resolve(a raft.ServerAddress) (string, string, bool) {
	san, dial, ok := strings.Cut(string(a), "@")
	return san, dial, ok
}

func startPort(t *testing.T, v volumeCA, san string) *port {
	t.Helper()
	creds, err := mux.NewCredentialSet(mux.Credentials{Certificate: v.cert(t, san), CA: v.pool, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return startPortWith(t, creds)
}

// startPortWith starts a port holding creds, which the test may replace.
func startPortWith(t *testing.T, creds *mux.CredentialSet) *port {
	t.Helper()
	p := &port{}
	p.rpc = &mux.RPCServer{Credentials: creds, Handler: func(_ context.Context, call *wire.Call) wire.Reply {
		p.calls.Add(1)
		return wire.Reply{Status: wire.StatusOK, Results: make([]wire.Result, len(call.Ops))}
	}}
	m, err := mux.Listen(mux.Config{
		Listen:      "127.0.0.1:0",
		Credentials: creds,
		AllowedPeer: isReplica,
		Resolve:     resolve,
		OnRPC:       func(c *tls.Conn) { p.rpc.ServeConn(c) },
	})
	if err != nil {
		t.Fatal(err)
	}
	p.mux = m
	t.Cleanup(func() { m.Close(); p.rpc.Close() })
	return p
}

func (p *port) addr() string { return p.mux.Addr().String() }

// dial opens a TLS connection offering the given protocol.
func dial(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	d := &tls.Dialer{Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c.(*tls.Conn), nil
}

func rpcConfig(v volumeCA, serverName string) *tls.Config {
	return &tls.Config{RootCAs: v.pool, ServerName: serverName, NextProtos: []string{wire.ProtoRPC}, MinVersion: tls.VersionTLS13}
}

// helloAndCall authenticates with tok and, when accepted, sends one query.
func helloAndCall(t *testing.T, c net.Conn, tok string) (hello, call wire.Reply, err error) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(deadline))
	if err := wire.WriteFrame(c, wire.AppendHello(&wire.Hello{Token: tok, ClientID: 7})); err != nil {
		return hello, call, err
	}
	if hello, err = readReply(c); err != nil || hello.Status != wire.StatusOK {
		return hello, call, err
	}
	body := wire.AppendCall(&wire.Call{ID: 42, Ops: []wire.Op{{Kind: wire.KindGetattr, Ino: 1}}})
	if err := wire.WriteFrame(c, body); err != nil {
		return hello, call, err
	}
	call, err = readReply(c)
	return hello, call, err
}

func readReply(c net.Conn) (wire.Reply, error) {
	body, err := wire.ReadFrame(c, wire.MaxFrame)
	if err != nil {
		return wire.Reply{}, err
	}
	_, rep, err := wire.DecodeReply(body)
	return rep, err
}

// closedByPeer waits (bounded) for the other end to close or reset c: a
// rejected connection is closed, an accepted one would stay open and time
// out here.
func closedByPeer(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(deadline))
	_, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("connection still open: the port accepted it")
	}
	return nil
}

// acceptOne runs the raft side of a port: the next connection raft would
// get, or nothing before the deadline.
func acceptOne(p *port) <-chan net.Conn {
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := p.mux.StreamLayer().Accept()
		if err == nil {
			ch <- c
		}
	}()
	return ch
}
