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
	if err := c.CreateReserved(ctx, client.RootIno, "reserved", want); err != nil {
		t.Fatalf("create with a reserved number: %v", err)
	}
	got, err := c.Lookup(ctx, client.RootIno, "reserved")
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
		err := c.CreateReserved(ctx, client.RootIno, "refused-"+fmt.Sprint(tc.ino), a)
		if !errors.Is(err, tc.want) {
			t.Errorf("create as reserved inode %d (%s): %v, want %v", tc.ino, tc.name, err, tc.want)
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
