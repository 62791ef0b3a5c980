package fuse_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// TestSecondSingleWriterMountFencesTheFirst mounts one volume twice as
// single-writer (a failover while the old node still runs): once the second
// mount is up, the first mount's writes and reads fail with EIO, including
// what its kernel caches; nothing it acknowledged before is lost; the second
// never reads a stale byte; and a checkpoint plus a restart of every replica
// keeps the first session fenced.
func TestSecondSingleWriterMountFencesTheFirst(t *testing.T) {
	c := startCluster(t, 64<<20)
	first := c.mount(t, cfuse.Options{SingleWriter: true, OwnerKey: "node-a"})
	acked := bytes.Repeat([]byte("acknowledged by the first mount\n"), 1<<15) // 1 MiB
	f, err := os.OpenFile(filepath.Join(first, "data"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// Closed before the unmount cleanup runs: a descriptor left open at
	// exit would flush into this process's own stopped mount and hang it.
	t.Cleanup(func() { _ = f.Close() })
	if _, err := f.WriteAt(acked, 0); err != nil {
		t.Fatalf("write before the second mount: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync before the second mount: %v", err)
	}
	// Fill the first mount's caches: pages, attributes, a negative name.
	if got := readAt(t, f, len(acked)); !bytes.Equal(got, acked) {
		t.Fatal("the first mount reads back something else than it wrote")
	}
	if _, err := os.Stat(filepath.Join(first, "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat of an absent name: %v", err)
	}

	second := c.mount(t, cfuse.Options{SingleWriter: true, OwnerKey: "node-b"})

	// Idle, the first mount touches nothing the kernel has not cached: only
	// its own epoch check can learn of the fence, and then its cached pages
	// must go.
	waitUntil(t, "the first mount's cached reads to fail with EIO", func() bool {
		_, err := f.ReadAt(make([]byte, 16), 0)
		return errors.Is(err, syscall.EIO)
	})
	_, werr := f.WriteAt([]byte("STALE WRITER"), 0)
	serr := f.Sync()
	if werr == nil && serr == nil {
		t.Fatal("the first mount kept writing after a second single-writer mount: write and fsync returned 0")
	}
	for _, err := range []error{werr, serr} {
		if err != nil && !errors.Is(err, syscall.EIO) {
			t.Fatalf("a fenced write failed with %v, want EIO", err)
		}
	}
	expectEIO(t, "stat through the first mount", func() error { _, err := os.Stat(filepath.Join(first, "data")); return err })
	expectEIO(t, "stat of a name the first mount knew absent", func() error {
		_, err := os.Stat(filepath.Join(first, "absent"))
		return err
	})
	expectEIO(t, "listing through the first mount", func() error { _, err := os.ReadDir(first); return err })
	expectEIO(t, "create through the first mount", func() error {
		return os.WriteFile(filepath.Join(first, "new"), []byte("x"), 0o644)
	})
	expectEIO(t, "close of the fenced descriptor", f.Close)

	// The second mount: every acknowledged byte, nothing of the fenced write.
	path := filepath.Join(second, "data")
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, acked) {
		t.Fatalf("the second mount reads %d bytes (err %v), want the %d the first acknowledged (equal: %v)",
			len(got), err, len(acked), bytes.Equal(got, acked))
	}
	newer := bytes.Repeat([]byte("written by the second mount....\n"), 1<<15) // as long as acked
	writeSynced(t, path, newer)
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, newer) {
		t.Fatalf("the second mount reads back a stale or short file (%d bytes, err %v)", len(got), err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}

	// A checkpoint on every replica, then a restart of all three from it.
	for i := range 3 {
		c.Checkpoint(t, i)
	}
	for i := range 3 {
		c.Kill(i)
	}
	for i := range 3 {
		c.Restart(i)
	}
	writeSynced(t, path, newer[:4096]) // waits out the election through the second mount
	restored := regexp.MustCompile(`cellfleet_replica_checkpoint_restore_seconds_count\{replica="r\d",volume="vol"\} [1-9]`)
	for i := range 3 {
		if !restored.MatchString(c.Metrics(t, i)) {
			t.Fatalf("r%d restarted without restoring its checkpoint", i)
		}
	}
	cfg := c.Config
	cfg.FencingEpoch = 1 // the first mount's: the volume's first epoch
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stale, err := client.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	if _, err := stale.Write(ctx, st.Ino, 0, []byte("STALE WRITER")); !errors.Is(err, client.ErrFenced) {
		t.Fatalf("after a checkpoint and restart the first mount's epoch writes with %v, want fenced", err)
	}
	fresh, err := client.Dial(ctx, cfg) // Fenced() is per client: ask the engine again
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := fresh.Read(ctx, st.Ino, 0, 16); !errors.Is(err, client.ErrFenced) {
		t.Fatalf("after a checkpoint and restart the first mount's epoch reads with %v, want fenced", err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, newer) {
		t.Fatalf("after the restart the second mount reads %d bytes (err %v), want its own %d", len(got), err, len(newer))
	}
}

func readAt(t *testing.T, f *os.File, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	k, err := f.ReadAt(b, 0)
	if err != nil && k != n {
		t.Fatalf("read %s: %v", f.Name(), err)
	}
	return b[:k]
}

func writeSynced(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		t.Fatalf("write %s: %v", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		t.Fatalf("fsync %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", path, err)
	}
}

func expectEIO(t *testing.T, what string, op func() error) {
	t.Helper()
	if err := op(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("%s of a fenced mount answered %v, want EIO", what, err)
	}
}
