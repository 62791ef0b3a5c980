package replica_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// createBehind sends one create behind and returns a channel with its outcome.
func createBehind(t *testing.T, c *client.Client, parent uint64, name string, a client.Attr) <-chan error {
	t.Helper()
	out := make(chan error, 1)
	if err := c.CreateBehind(context.Background(), parent, name, a, func(err error) { out <- err }); err != nil {
		t.Fatalf("create %s behind: %v", name, err)
	}
	return out
}

func outcome(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("a create sent behind was never answered")
		return nil
	}
}

// Creates with reserved inode numbers: the engine makes the file with the
// number and time the client chose (the attributes the mount already told
// the kernel), never hands a reserved number to another create, and refuses
// a number no reservation gave out or one in use.
func TestReservedCreatesMakeTheFileTheClientDescribed(t *testing.T) {
	g := newGroup(t, 3)
	c := g.client(t)
	ctx := context.Background()
	first, err := c.ReserveInos(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.ReserveInos(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	if second < first+8 {
		t.Fatalf("second reservation starts at %d, inside the first [%d, %d)", second, first, first+8)
	}
	plain, err := c.Create(ctx, client.RootIno, "plain", 0o600, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Ino < second+8 {
		t.Fatalf("a coordinator-numbered create got inode %d, inside a reservation (next free %d)", plain.Ino, second+8)
	}

	// The time is the client's, even one well before the coordinator's.
	want := client.NewFileAttr(first+3, 0o640, 1000, 2000, time.Now().Add(-time.Hour).UnixNano())
	if err := outcome(t, createBehind(t, c, client.RootIno, "behind", want)); err != nil {
		t.Fatalf("create behind: %v", err)
	}
	got, err := c.Lookup(ctx, client.RootIno, "behind")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("the engine made %+v, the client described %+v", got, want)
	}
	root, err := c.GetAttr(ctx, client.RootIno)
	if err != nil {
		t.Fatal(err)
	}
	if root.Mtime < plain.Ctime {
		t.Fatalf("root mtime %d went back below the earlier create's %d for a create of an older time", root.Mtime, plain.Ctime)
	}

	for _, tc := range []struct {
		name string
		ino  uint64
		want error
	}{
		{"in use", first + 3, syscall.EIO},
		{"never reserved", plain.Ino + 1000, client.ErrProtocol},
		{"the root", client.RootIno, client.ErrProtocol},
	} {
		a := client.NewFileAttr(tc.ino, 0o644, 0, 0, time.Now().UnixNano())
		err := outcome(t, createBehind(t, c, client.RootIno, "refused-"+fmt.Sprint(tc.ino), a))
		if !errors.Is(err, tc.want) {
			t.Errorf("create behind as inode %d (%s): %v, want %v", tc.ino, tc.name, err, tc.want)
		}
	}
	// Every replica applied the same state.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var digests []string
		for _, w := range g.workers {
			idx, d, err := w.Digest()
			if err != nil {
				t.Fatal(err)
			}
			digests = append(digests, fmt.Sprint(idx, " ", d))
		}
		if digests[0] == digests[1] && digests[1] == digests[2] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas did not converge: %v", digests)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Order: a call made after a create sent behind reaches the engine after
// the create was answered, so it sees the file. Without the client's wait
// the unlink and the stat overtake the creates (they are on their own
// goroutines at the coordinator) and fail with ENOENT.
func TestCallsAfterACreateSentBehindSeeTheFile(t *testing.T) {
	g := newGroup(t, 3)
	c := g.client(t)
	ctx := context.Background()
	first, err := c.ReserveInos(ctx, 200)
	if err != nil {
		t.Fatal(err)
	}
	var outs []<-chan error
	for i := range 100 {
		name := fmt.Sprint("f", i)
		outs = append(outs, createBehind(t, c, client.RootIno, name, client.NewFileAttr(first+uint64(i), 0o644, 0, 0, time.Now().UnixNano())))
		if i%2 == 0 {
			if _, err := c.GetAttr(ctx, first+uint64(i)); err != nil {
				t.Fatalf("stat of inode %d right after its create was sent behind: %v", first+uint64(i), err)
			}
		} else if err := c.Unlink(ctx, client.RootIno, name); err != nil {
			t.Fatalf("unlink of %s right after its create was sent behind: %v", name, err)
		}
	}
	for _, o := range outs {
		if err := outcome(t, o); err != nil {
			t.Fatal(err)
		}
	}
}

// Creates queued while the calls carrying earlier ones are busy leave
// together: a few journal entries carry them all, and each keeps its own
// outcome (one the engine refuses fails alone). Sent one call each, the
// 200 creates took 200 entries.
func TestCreatesSentBehindShareJournalEntries(t *testing.T) {
	g := newGroup(t, 3)
	c := g.client(t)
	ctx := context.Background()
	const n = 200
	first, err := c.ReserveInos(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	lastIndex := func() uint64 {
		var last uint64
		for _, w := range g.workers {
			last = max(last, w.Stats().LastIndex)
		}
		return last
	}
	before := lastIndex()
	const refused = 120 // made with the inode of the create before it: in use
	var outs []<-chan error
	for i := range n {
		ino := first + uint64(i)
		if i == refused {
			ino--
		}
		outs = append(outs, createBehind(t, c, client.RootIno, fmt.Sprint("f", i), client.NewFileAttr(ino, 0o644, 0, 0, time.Now().UnixNano())))
	}
	for i, o := range outs {
		err := outcome(t, o)
		switch {
		case i == refused && !errors.Is(err, syscall.EIO):
			t.Errorf("create %d with an inode in use: %v, want EIO", i, err)
		case i != refused && err != nil:
			t.Errorf("create %d: %v", i, err)
		}
	}
	entries := lastIndex() - before
	t.Logf("%d creates sent behind took %d journal entries", n, entries)
	if entries > n/4 {
		t.Errorf("%d creates sent behind took %d journal entries: creates queued behind busy calls must leave together", n, entries)
	}
	for i := range n {
		_, err := c.Lookup(ctx, client.RootIno, fmt.Sprint("f", i))
		switch {
		case i == refused && !errors.Is(err, syscall.ENOENT):
			t.Errorf("lookup of the refused create: %v, want ENOENT", err)
		case i != refused && err != nil:
			t.Errorf("lookup of f%d: %v", i, err)
		}
	}
}
