package replica_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/mux"
	"github.com/cellfleet/cellfleet/internal/replica/pki"
)

type group struct {
	ca      *pki.CA
	token   string
	cfgs    []replica.Config
	workers []*replica.Worker
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// dialPeer is cmd/replica-host's: the workers fetch a checkpoint's chunks
// over the client's stream.
func dialPeer(ctx context.Context, t replica.PeerTarget) (replica.ChunkFetcher, error) {
	return client.DialPeer(ctx, client.Config{Volume: t.Volume, RootCAs: t.Credentials.CA,
		Certificates: []tls.Certificate{t.Credentials.Certificate}, Token: t.Credentials.Token, Logger: t.Logger},
		client.Endpoint{ID: t.ID, Address: t.Address, ServerName: t.ServerName})
}

// newGroup starts n in-process workers of one volume.
func newGroup(t testing.TB, n int, tweak ...func(*replica.Config)) *group {
	t.Helper()
	ca, err := pki.NewCA("vol", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	g := &group{ca: ca, token: pki.NewToken()}
	var peers []replica.Peer
	for i := 0; i < n; i++ {
		peers = append(peers, replica.Peer{ID: fmt.Sprintf("r%d", i), Address: freePort(t), ServerName: fmt.Sprintf("vol-r%d.test", i)})
	}
	dir := t.TempDir()
	for i := 0; i < n; i++ {
		cert, err := ca.IssueTLS([]string{peers[i].ServerName}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		var others []replica.Peer
		for j, p := range peers {
			if j != i {
				others = append(others, p)
			}
		}
		creds, err := mux.NewCredentialSet(mux.Credentials{Certificate: cert, CA: ca.Pool(), Token: g.token})
		if err != nil {
			t.Fatal(err)
		}
		cfg := replica.Config{Volume: "vol", Replica: peers[i].ID, Generation: 1,
			DataDir: filepath.Join(dir, peers[i].ID), Listen: peers[i].Address, Self: peers[i], Peers: others,
			Bootstrap: i == 0, Credentials: creds, DialPeer: dialPeer, Capacity: 64 << 20,
			Timing: replica.Timing{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
				LeaderLeaseTimeout: 100 * time.Millisecond},
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
		for _, f := range tweak {
			f(&cfg)
		}
		g.cfgs = append(g.cfgs, cfg)
		w, err := replica.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		g.workers = append(g.workers, w)
		t.Cleanup(func() { w.Close() })
	}
	return g
}

func (g *group) client(t testing.TB) *client.Client {
	t.Helper()
	var eps []client.Endpoint
	for _, c := range g.cfgs {
		eps = append(eps, client.Endpoint{ID: c.Replica, Address: c.Listen, ServerName: c.Self.ServerName})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Volume: "vol", Endpoints: eps, RootCAs: g.ca.Pool(), Token: g.token})
	if err != nil {
		t.Fatalf("client could not connect to the volume: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestWorkerGroupServesFileOperations(t *testing.T) {
	g := newGroup(t, 3)
	c := g.client(t)
	ctx := context.Background()
	a, err := c.Create(ctx, client.RootIno, "f", 0o644, 0, 0)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := c.Write(ctx, a.Ino, 0, []byte("hello")); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := c.Read(ctx, a.Ino, 0, 100)
	if err != nil || string(got) != "hello" {
		t.Fatalf("read back %q, %v; want hello", got, err)
	}
	if _, err := c.Create(ctx, client.RootIno, "f", 0o644, 0, 0); err != syscall.EEXIST {
		t.Fatalf("second create of the same name: %v, want EEXIST", err)
	}
	ents, err := c.Readdir(ctx, client.RootIno, 0, 10)
	if err != nil || len(ents) != 1 || ents[0].Name != "f" {
		t.Fatalf("readdir %v, %v", ents, err)
	}
}

func TestEvictedClientSessionRegistersAgainWhenNothingWasSent(t *testing.T) {
	g := newGroup(t, 1, func(c *replica.Config) { c.MaxSessions = 2 })
	ctx := context.Background()
	a := g.client(t)
	f, err := a.Create(ctx, client.RootIno, "f", 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	first := a.ClientID()
	g.client(t) // two newer sessions evict a's
	g.client(t)
	if _, _, err := a.Append(ctx, f.Ino, []byte("x")); err != nil {
		t.Fatalf("an operation first sent after eviction must be retried under a new session, got %v", err)
	}
	if a.ClientID() == first {
		t.Fatalf("the client kept its evicted session")
	}
	if got, err := a.Read(ctx, f.Ino, 0, 10); err != nil || string(got) != "x" {
		t.Fatalf("file holds %q (%v), want the append exactly once", got, err)
	}
}
