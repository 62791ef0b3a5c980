package processtest

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/pki"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

func TestBadInputIsRejectedWithClearErrorsAndNothingApplied(t *testing.T) {
	c := startCluster(t, clusterOpts{replicas: 1})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 3)
	before, err := c.digest(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("wrong bearer token", func(t *testing.T) {
		cfg := c.clientConfig()
		cfg.Token = strings.Repeat("x", 64)
		_, err := client.Dial(ctx, cfg)
		if !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("a wrong token must be rejected as unauthorized, got %v", err)
		}
	})
	foreign, err := pki.NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("client trusting another volume's CA", func(t *testing.T) {
		cfg := c.clientConfig()
		cfg.RootCAs = foreign.Pool()
		cfg.RetryBudget = time.Second
		_, err := client.Dial(ctx, cfg)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("a worker certificate from another CA must fail verification, got %v", err)
		}
	})
	t.Run("raft peer with a certificate from another CA", func(t *testing.T) {
		cert, _ := foreign.IssueTLS([]string{c.peers[0].ServerName}, time.Hour)
		expectClosed(t, c, []tls.Certificate{cert})
	})
	t.Run("raft peer without a certificate", func(t *testing.T) {
		expectClosed(t, c, nil)
	})
	t.Run("raft peer whose SAN names no replica", func(t *testing.T) {
		ca := loadCA(t, c)
		cert, _ := ca.IssueTLS([]string{"intruder.example"}, time.Hour)
		expectClosed(t, c, []tls.Certificate{cert})
	})

	good := wire.Op{Kind: wire.KindWrite, Session: 1, Seq: 1, Ino: ino, Data: []byte("x")}
	cases := []struct {
		name string
		body []byte
	}{
		{"garbage frame", []byte{0xFF, 0x00, 0x13}},
		{"unknown operation", append(wire.AppendCall(&wire.Call{ID: 1, Ops: []wire.Op{good}})[:2:2], 0x01, 0xEE)},
		{"truncated call", wire.AppendCall(&wire.Call{ID: 1, Ops: []wire.Op{good}})[:12]},
		{"query batched with a mutation", wire.AppendCall(&wire.Call{ID: 1, Ops: []wire.Op{good, {Kind: wire.KindGetattr, Ino: ino}}})},
		{"two queries in one call", wire.AppendCall(&wire.Call{ID: 1, Ops: []wire.Op{{Kind: wire.KindGetattr, Ino: 1}, {Kind: wire.KindGetattr, Ino: 1}}})},
		{"mutation without a session", wire.AppendCall(&wire.Call{ID: 1, Ops: []wire.Op{{Kind: wire.KindWrite, Ino: ino, Data: []byte("x")}}})},
		{"data beyond the limit", wire.AppendCall(&wire.Call{ID: 1, Ops: []wire.Op{{Kind: wire.KindWrite, Session: 1, Seq: 1, Ino: ino, Data: make([]byte, wire.MaxData+1)}}})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.raw(0, c.token())
			if rep, err := r.recv(); err != nil || rep.Status != wire.StatusOK {
				t.Fatalf("hello: %v %v", rep.Status, err)
			}
			r.send(tc.body)
			rep, err := r.recv()
			if err != nil {
				t.Fatalf("the worker closed without saying why: %v", err)
			}
			if rep.Status != wire.StatusBadRequest || rep.Message == "" {
				t.Fatalf("want a bad-request reply with a reason, got %s %q", rep.Status, rep.Message)
			}
		})
	}
	t.Run("length prefix beyond the frame limit", func(t *testing.T) {
		r := c.raw(0, c.token())
		if _, err := r.recv(); err != nil {
			t.Fatal(err)
		}
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], wire.MaxFrame+1)
		if _, err := r.tc.Write(hdr[:]); err != nil {
			t.Fatal(err)
		}
		rep, err := r.recv()
		if err != nil || rep.Status != wire.StatusBadRequest || !strings.Contains(rep.Message, "exceeds") {
			t.Fatalf("an oversized frame must be refused before it is read, got %v %q %v", rep.Status, rep.Message, err)
		}
	})
	after, err := c.digest(0)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("rejected input changed the replica's state: %+v -> %+v", before, after)
	}
}

func loadCA(t *testing.T, c *cluster) *pki.CA {
	t.Helper()
	f := c.HostFile(0)
	crt, err1 := readFile(f.Workers[0].CAFile)
	key, err2 := readFile(strings.TrimSuffix(f.Workers[0].CAFile, ".crt") + ".key")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	ca, err := pki.LoadCA(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// expectClosed dials the Raft protocol with certs and expects the worker to
// refuse the connection during or right after the handshake.
func expectClosed(t *testing.T, c *cluster, certs []tls.Certificate) {
	t.Helper()
	tc, err := dialTLS(c.peers[0].Address, c.peers[0].ServerName, c.clientConfig().RootCAs, certs, wire.ProtoRaft)
	if err != nil {
		return // refused in the handshake
	}
	defer tc.Close()
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	if _, err := tc.Read(b[:]); err == nil {
		t.Fatalf("the worker accepted a raft stream from an unverified peer")
	}
}
