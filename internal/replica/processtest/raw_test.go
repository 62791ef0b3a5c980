package processtest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// rawConn speaks the client protocol frame by frame, so tests can replay an
// operation with a chosen identity or send malformed input.
type rawConn struct {
	t  testing.TB
	tc *tls.Conn
}

func dialTLS(addr, serverName string, roots *x509.CertPool, certs []tls.Certificate, proto string) (*tls.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 3 * time.Second}, Config: &tls.Config{
		RootCAs: roots, ServerName: serverName, Certificates: certs, NextProtos: []string{proto}, MinVersion: tls.VersionTLS13}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return c.(*tls.Conn), nil
}

func (c *cluster) raw(i int, token string) *rawConn {
	c.t.Helper()
	cfg := c.clientConfig()
	tc, err := dialTLS(c.peers[i].Address, c.peers[i].ServerName, cfg.RootCAs, nil, wire.ProtoRPC)
	if err != nil {
		c.t.Fatalf("dial r%d: %v", i, err)
	}
	c.t.Cleanup(func() { tc.Close() })
	r := &rawConn{t: c.t, tc: tc}
	r.send(wire.AppendHello(&wire.Hello{Token: token, ClientID: 1}))
	return r
}

func (r *rawConn) send(body []byte) {
	r.t.Helper()
	_ = r.tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := wire.WriteFrame(r.tc, body); err != nil {
		r.t.Fatalf("send frame: %v", err)
	}
}

func (r *rawConn) recv() (wire.Reply, error) {
	_ = r.tc.SetDeadline(time.Now().Add(10 * time.Second))
	body, err := wire.ReadFrame(r.tc, wire.MaxFrame)
	if err != nil {
		return wire.Reply{}, err
	}
	_, rep, err := wire.DecodeReply(body)
	return rep, err
}

func (r *rawConn) call(ops ...wire.Op) wire.Reply {
	r.t.Helper()
	r.send(wire.AppendCall(&wire.Call{ID: 7, Ops: ops}))
	rep, err := r.recv()
	if err != nil {
		r.t.Fatalf("reply: %v", err)
	}
	return rep
}

func (c *cluster) token() string {
	c.t.Helper()
	return c.clientConfig().Token
}
