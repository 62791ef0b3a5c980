package fuse_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
)

// TestALeaseExpiryDropsCachesWhileADirectoryOperationWaits: with the
// quorum lost, a create waits for the engine while the kernel holds its
// directory's lock. The fencing lease expires meanwhile, and the mount must
// go on dropping the kernel's caches at every check (docs/fuse.md, "The
// lease"): an invalidation that waited for that directory's lock would stall
// the lease for as long as the create waits, and a killed owner stuck in it
// could not exit.
func TestALeaseExpiryDropsCachesWhileADirectoryOperationWaits(t *testing.T) {
	c := startCluster(t, 64<<20)
	drops := &messageCounter{substr: "dropping the kernel's caches"}
	mnt := c.mount(t, cfuse.Options{SingleWriter: true, OwnerKey: "node-a", Logger: slog.New(drops)})
	dir := filepath.Join(mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A name the mount knows in the directory, whose kernel entry an
	// invalidation of names would drop under the directory's lock.
	if err := os.WriteFile(filepath.Join(dir, "known"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	c.Kill(1)
	c.Kill(2)
	created := make(chan error, 1)
	go func() {
		f, err := os.Create(filepath.Join(dir, "waits-for-quorum"))
		if err == nil {
			err = f.Close()
		}
		created <- err
	}()
	t.Cleanup(func() {
		c.Restart(1)
		c.Restart(2)
		<-created
	})

	waitUntil(t, "the lease to expire and the first drop of the kernel's caches", func() bool { return drops.n.Load() > 0 })
	select {
	case err := <-created:
		t.Fatalf("the create returned (%v) before the lease expired: it did not wait for the quorum", err)
	default:
	}
	first := drops.n.Load()
	// A check waits for the engine for up to the lease (2 s) and then drops
	// the caches: at least two drops in three leases.
	const window = 6 * time.Second
	time.Sleep(window)
	select {
	case err := <-created:
		created <- err
		t.Fatalf("the create returned (%v) within the window: no directory operation was waiting", err)
	default:
	}
	if got := drops.n.Load() - first; got < 2 {
		t.Fatalf("the kernel's caches were dropped %d times in %v while a create waited in a directory, want at least 2 (one per check)", got, window)
	}
}

// messageCounter is a slog handler counting the records whose message
// contains substr.
type messageCounter struct {
	substr string
	n      atomic.Int64
}

func (h *messageCounter) Enabled(context.Context, slog.Level) bool { return true }

func (h *messageCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.substr) {
		h.n.Add(1)
	}
	return nil
}

func (h *messageCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *messageCounter) WithGroup(string) slog.Handler      { return h }
