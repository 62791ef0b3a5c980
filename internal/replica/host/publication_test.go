package host_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/journal"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// A data directory that exists but carries no bind yet is the bare
// directory of the host's own view: a worker initialised there would write
// its identity and journal beside the backing volume, not on it.
func TestWorkerWaitsForTheBackingVolumesBindNotForTheDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("publishing a data directory needs a bind mount, which needs root")
	}
	f := newFixture(t)
	bare, other := f.spec(0), f.spec(1)
	if err := os.MkdirAll(bare.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.h.Add(bare); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.h.Add(other); err != nil {
		t.Fatal(err)
	}
	// The second worker, published after both were admitted, starts; the
	// first, whose directory existed all along, must still be waiting.
	publish(t, other.DataDir)
	poll.UntilTrue(t, 20*time.Second, other.Key()+" running", func() bool {
		_, st, _ := f.h.Worker(other.Key())
		return st.State == replica.ReplicaStateRunning
	})
	if _, st, _ := f.h.Worker(bare.Key()); st.State != replica.ReplicaStateStarting {
		t.Fatalf("a worker whose data directory exists without a bind must wait for the bind, but it is %s (%s)", st.State, st.Reason)
	}
	if _, err := os.Stat(filepath.Join(bare.DataDir, journal.IdentityFile)); !os.IsNotExist(err) {
		t.Fatalf("the worker wrote its identity into the unpublished bare directory (stat: %v)", err)
	}

	// The backing volume's bind appears: the worker starts on it.
	backing := filepath.Join(f.dir, "backing")
	if err := os.MkdirAll(backing, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(backing, bare.DataDir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind the backing volume: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(bare.DataDir, unix.MNT_DETACH) })
	poll.UntilTrue(t, 20*time.Second, bare.Key()+" running once its bind appears", func() bool {
		_, st, _ := f.h.Worker(bare.Key())
		return st.State == replica.ReplicaStateRunning
	})
	if _, err := os.Stat(filepath.Join(backing, journal.IdentityFile)); err != nil {
		t.Fatalf("the worker's identity is not on the backing volume: %v", err)
	}
}
