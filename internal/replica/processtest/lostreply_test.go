package processtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// throughReplyProxy returns a client configuration whose route to replica
// i passes through a reply-losing proxy.
func (c *cluster) throughReplyProxy(i int) (client.Config, *replyProxy) {
	c.t.Helper()
	cfg := c.clientConfig()
	px := newReplyProxy(c.t, c.peers[i].Address)
	for k := range cfg.Endpoints {
		if cfg.Endpoints[k].ID == c.peers[i].ID {
			cfg.Endpoints[k].Address = px.addr()
		}
	}
	return cfg, px
}

// onCoordinator makes sure cl talks to replica i (a read follows the
// coordinator hint) so the next mutation crosses i's proxy.
func onCoordinator(t *testing.T, cl *client.Client, c *cluster, i int, ino uint64) {
	t.Helper()
	readAll(t, cl, ino)
	if got := cl.Coordinator(); got != c.peers[i].ID {
		t.Fatalf("client talks to %s, want the coordinator %s", got, c.peers[i].ID)
	}
}

func TestLostReplyIsRetriedWithTheSameIdentityAndAppliedOnce(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	leader := c.waitLeader(10 * time.Second)
	cfg, px := c.throughReplyProxy(leader)
	cl := c.client(cfg)
	ino := createFile(t, cl, "log")
	onCoordinator(t, cl, c, leader, ino)
	id := cl.ClientID()
	before := px.connections()

	dropped := px.dropNextReply(false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, attr, err := cl.Append(ctx, ino, []byte("once\n"))
	select {
	case <-dropped:
	default:
		t.Fatal("the proxy never lost a reply: the test did not inject the fault")
	}
	if err != nil {
		t.Fatalf("a mutation whose reply was lost must be retried to its first result, got %v", err)
	}
	if attr.Size != 5 {
		t.Fatalf("the retry returned size %d, want the first result's 5", attr.Size)
	}
	if px.connections() <= before {
		t.Fatal("the client never retried over a new connection")
	}
	if got := cl.ClientID(); got != id {
		t.Fatalf("the retry changed the exactly-once identity from %x to %x", id, got)
	}
	other := c.client(c.clientConfig())
	if got := readAll(t, other, ino); !bytes.Equal(got, []byte("once\n")) {
		t.Fatalf("file holds %q after a lost reply and a retry: the append must apply exactly once", got)
	}
}

func TestEvictedSessionAfterAPossiblyAppliedSendIsUncertainAndNothingAppliesTwice(t *testing.T) {
	const maxSessions = 2
	c := startCluster(t, clusterOpts{maxSessions: maxSessions})
	leader := c.waitLeader(10 * time.Second)
	cfg, px := c.throughReplyProxy(leader)
	cfg.RetryBudget = 30 * time.Second
	cl := c.client(cfg)
	ino := createFile(t, cl, "log")
	onCoordinator(t, cl, c, leader, ino)
	id := cl.ClientID()

	// The append applies, its reply is lost, and the coordinator stays
	// unreachable for this client while other clients evict its session.
	dropped := px.dropNextReply(true)
	type outcome struct{ err error }
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _, err := cl.Append(ctx, ino, []byte("once\n"))
		done <- outcome{err}
	}()
	select {
	case <-dropped:
	case o := <-done:
		t.Fatalf("the append finished before its reply was lost: %v", o.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy never saw the append's reply")
	}
	ctx := context.Background()
	for k := 0; k <= maxSessions; k++ {
		o := c.client(c.clientConfig())
		if _, err := o.Create(ctx, client.RootIno, fmt.Sprintf("evict-%d", k), 0o644, 0, 0); err != nil {
			t.Fatalf("client %d of the eviction: %v", k, err)
		}
	}
	px.setRefusing(false)

	var err error
	select {
	case o := <-done:
		err = o.err
	case <-time.After(time.Minute):
		t.Fatal("the append never returned after the coordinator became reachable")
	}
	if !errors.Is(err, client.ErrUncertain) || !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("a retry whose session was evicted after a send that may have applied must report an uncertain result (session expired), got %v", err)
	}
	if errno := client.ToErrno(err); errno != syscall.EIO {
		t.Fatalf("an uncertain result must reach the kernel as EIO, got %v", errno)
	}
	reader := c.client(c.clientConfig())
	if got := readAll(t, reader, ino); !bytes.Equal(got, []byte("once\n")) {
		t.Fatalf("file holds %q: the first send applied, so exactly one record, never two", got)
	}

	// The client carries on under a new session and nothing old replays.
	if _, _, err := cl.Append(ctx, ino, []byte("next\n")); err != nil {
		t.Fatalf("after an expired session the client must register a new one and continue: %v", err)
	}
	if cl.ClientID() == id {
		t.Fatal("the client kept its evicted session")
	}
	if got := readAll(t, reader, ino); !bytes.Equal(got, []byte("once\nnext\n")) {
		t.Fatalf("file holds %q, want the uncertain append once, then the next one", got)
	}
}
