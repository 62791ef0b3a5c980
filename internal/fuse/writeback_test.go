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

// TestWriteBehindFailureReachesEveryWriterOnce: a write-behind failure is
// reported, once, to every descriptor that was open for writing when it
// happened (Linux's errseq_t rule), whoever closes first: a read-only
// descriptor's close neither reports nor consumes it, and a descriptor
// opened for writing after it was reported does not see it.
func TestWriteBehindFailureReachesEveryWriterOnce(t *testing.T) {
	const capacity = 16 << 20
	c := startCluster(t, capacity)
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	path := filepath.Join(mnt, "overfull")
	writer, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	idle, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()

	// 24 MiB into a 16 MiB volume: the writes are answered once queued;
	// the engine refuses the ones past the capacity afterwards. A write
	// made after a refusal came back fails at once; that is allowed.
	buf := make([]byte, 1<<20)
	written := 0
	for i := range 24 {
		if _, err := writer.WriteAt(buf, int64(i)<<20); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("write %d: %v, want success or ENOSPC", i, err)
			}
			break
		}
		written++
	}
	t.Logf("%d of 24 writes of 1 MiB answered before a refusal was known", written)

	reader, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Close(); err != nil {
		t.Fatalf("the close of a read-only descriptor must not report (or consume) the writers' failure, got %v", err)
	}
	if err := writer.Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the writer's fsync must report the write refused after it was answered with ENOSPC, got %v", err)
	}
	if err := writer.Sync(); err != nil {
		t.Fatalf("a failure is reported once to each descriptor; the writer's next fsync must succeed, got %v", err)
	}
	late, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Close(); err != nil {
		t.Fatalf("a descriptor opened for writing after the failure was reported must not see it, got %v", err)
	}
	if err := idle.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a descriptor open for writing when the failure happened must see it at close, got %v", err)
	}
	if err := writer.Close(); err != nil {
		t.Fatalf("the writer's close after its fsync reported the failure: %v, want success", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > capacity {
		t.Fatalf("the file holds %d bytes, more than the volume's %d", st.Size(), capacity)
	}
}

// TestFsyncOfADirectorySucceeds: every name change is committed on a
// quorum before it is answered, so fsync of a directory has nothing to
// wait for and answers 0 (applications fsync the directory after a rename
// to make it durable, and treat an error as a failed commit).
func TestFsyncOfADirectorySucceeds(t *testing.T) {
	c := startCluster(t, 16<<20)
	for _, mode := range []struct {
		name         string
		singleWriter bool
	}{{"single-writer", true}, {"shared", false}} {
		t.Run(mode.name, func(t *testing.T) {
			mnt := c.mount(t, cfuse.Options{SingleWriter: mode.singleWriter})
			dir := filepath.Join(mnt, mode.name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "tmp"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, "tmp"), filepath.Join(dir, "final")); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{dir, mnt} {
				f, err := os.Open(d)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					t.Errorf("fsync of directory %s: %v, want success", d, err)
				}
				if err := f.Close(); err != nil {
					t.Errorf("close of directory %s: %v", d, err)
				}
			}
		})
	}
}
