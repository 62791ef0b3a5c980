package fuse_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
)

// TestWriteBehind covers what single-writer write-behind promises
// (writeback.go): order among overlapping writes in flight, and failures
// that happen after a WRITE was answered reported by close and fsync.
func TestWriteBehind(t *testing.T) {
	const capacity = 16 << 20
	c := startCluster(t, capacity)
	// One write per engine call and many calls in flight: the most
	// chances for two calls to reach the coordinator out of order.
	mnt := c.mount(t, cfuse.Options{SingleWriter: true, Batch: cfuse.BatchOptions{MaxOps: 1, InFlight: 64}})

	t.Run("overlapping writes in flight commit in the order they were made", func(t *testing.T) {
		path := filepath.Join(mnt, "overlap")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, 0, 2<<20)
		put := func(off int, b []byte) {
			if _, err := f.WriteAt(b, int64(off)); err != nil {
				t.Fatalf("write at %d: %v", off, err)
			}
			if end := off + len(b); end > len(want) {
				want = append(want, make([]byte, end-len(want))...)
			}
			copy(want[off:], b)
		}
		for i := range 3000 {
			// Large writes interleaved with small ones over the same
			// bytes: any two in flight in the wrong order leave the wrong
			// byte behind.
			size := 4096
			if i%97 == 0 {
				size = 1 << 20
			}
			put((i%3)*1000, bytes.Repeat([]byte{byte(i)}, size))
		}
		if err := f.Close(); err != nil {
			t.Fatalf("close after the writes: %v", err)
		}
		// Read what the volume holds, not this kernel's pages.
		fresh := c.mount(t, cfuse.Options{SingleWriter: true, ReadOnly: true})
		got, err := os.ReadFile(filepath.Join(fresh, "overlap"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Fatalf("the volume holds %d bytes differing from the writes' order at byte %d (got %d bytes)", len(got), i, len(want))
		}
	})

	t.Run("a write that fails after it was answered fails close and later writes", func(t *testing.T) {
		path := filepath.Join(mnt, "past-capacity")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		// One write beyond the volume's capacity: answered at once
		// (queued), refused by the engine with ENOSPC afterwards.
		if _, err := f.WriteAt(make([]byte, 1<<20), capacity); err != nil {
			t.Fatalf("the queued write must be answered before its commit, got %v", err)
		}
		if err := f.Close(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("close must report the write refused after it was answered with ENOSPC, got %v", err)
		}

		f, err = os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(make([]byte, 1<<20), capacity); err != nil {
			t.Fatalf("queue the second refused write: %v", err)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := f.WriteAt([]byte("x"), 0)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil || time.Now().After(deadline) {
				t.Fatalf("writes to a file whose earlier write failed must fail with that error, got %v", err)
			}
		}
		if err := f.Sync(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("fsync must still report the failure the writes reported, got %v", err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("a failure is reported once; the next fsync must succeed, got %v", err)
		}
	})
}
