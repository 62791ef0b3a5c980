package fuse_test

// The rule of settled_test.go on each path a write can take to its quorum:
// write-behind answered before the commit, a retry of an uncertain call
// under the same identity, a coordinator change, a fencing-lease expiry
// that drops the kernel's caches, and a remount.

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

// record is 4 KiB that says which write made it.
func record(tag string) []byte {
	return bytes.Repeat([]byte(tag+"\n"), 4096/(len(tag)+1)+1)[:4096]
}

// readBack returns a reader of names through a fresh read-only mount, so
// the bytes come from the volume and not from a kernel's pages.
func (c *cluster) readBack(t *testing.T) func(name string) []byte {
	t.Helper()
	fresh := c.mount(t, cfuse.Options{SingleWriter: true, ReadOnly: true})
	return func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(fresh, name))
		if err != nil {
			t.Fatalf("read %s back: %v", name, err)
		}
		return b
	}
}

// createAndClose creates path, writes data and closes it, without fsync.
func createAndClose(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close of %s: %v", path, err)
	}
}

// TestWhatACloseAnsweredSurvivesEveryPath: what a successful close or
// fsync answered is on the volume after each path in turn.
func TestWhatACloseAnsweredSurvivesEveryPath(t *testing.T) {
	c := startCluster(t, 1<<30)
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	dir := filepath.Join(mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	t.Run("writes behind, then every host killed", func(t *testing.T) {
		// The writes are answered before their commit: the close is what
		// waits.
		for i := range 20 {
			createAndClose(t, filepath.Join(dir, "behind-"+string(rune('a'+i))), record("behind"))
		}
		for i := range 3 {
			c.Kill(i)
		}
		for i := range 3 {
			c.Restart(i)
		}
		read := c.readBack(t)
		for i := range 20 {
			name := filepath.Join("d", "behind-"+string(rune('a'+i)))
			if got := read(name); !bytes.Equal(got, record("behind")) {
				t.Fatalf("%s after every host was killed: %d bytes, not what its close acknowledged", name, len(got))
			}
		}
	})

	t.Run("a coordinator change while writes are queued", func(t *testing.T) {
		path := filepath.Join(dir, "failover")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var want []byte
		for i := range 256 {
			r := record("failover " + string(rune('a'+i%26)))
			if i == 64 {
				c.KillCoordinator(t)
			}
			if _, err := f.Write(r); err != nil {
				t.Fatalf("write %d across the coordinator's kill: %v", i, err)
			}
			want = append(want, r...)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync across the coordinator's kill: %v, want success (a new coordinator is elected)", err)
		}
		for i := range 3 {
			c.Restart(i)
		}
		if got := c.readBack(t)(filepath.Join("d", "failover")); !bytes.Equal(got, want) {
			t.Fatalf("after a coordinator change the volume holds %d bytes differing from the %d acknowledged", len(got), len(want))
		}
	})

	t.Run("a fencing lease expiry drops the caches while writes are queued", func(t *testing.T) {
		path := filepath.Join(dir, "lease")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		heal := c.stallQuorum(t)
		if _, err := f.WriteAt(record("lease"), 0); err != nil {
			t.Fatalf("write without a quorum: %v, want it queued", err)
		}
		// Longer than the mount's fencing lease (2 s): the mount drops the
		// kernel's caches, and the write is still being retried.
		time.Sleep(3 * time.Second)
		heal()
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync once the quorum is back within the retry budget: %v, want success", err)
		}
		if got := c.readBack(t)(filepath.Join("d", "lease")); !bytes.Equal(got, record("lease")) {
			t.Fatalf("after the lease expired the volume holds %q..., not the fsync'd record", got[:min(len(got), 16)])
		}
	})

	t.Run("a remount", func(t *testing.T) {
		// The new mount fences this one: it sees what this one's close
		// answered, and this one can no longer write.
		createAndClose(t, filepath.Join(dir, "before-remount"), record("remount"))
		again := c.mount(t, cfuse.Options{SingleWriter: true, OwnerKey: "remount"})
		got, err := os.ReadFile(filepath.Join(again, "d", "before-remount"))
		if err != nil || !bytes.Equal(got, record("remount")) {
			t.Fatalf("the new mount reads %d bytes (%v), not what the old mount's close answered", len(got), err)
		}
	})
}

// TestAnUncertainWriteNeverAppliesAfterWhatFollowed: a write whose fsync
// answered EIO (an uncertain outcome: its entry may sit in the old
// coordinator's log) is settled. The program moves on and writes the same
// bytes again and more of the file; once the transport heals, the uncertain
// write may still commit, but only before what followed it, and only with
// its own data, never with bytes of a buffer used since.
func TestAnUncertainWriteNeverAppliesAfterWhatFollowed(t *testing.T) {
	c := startCluster(t, 1<<30)
	c.Config.RetryBudget = 10 * time.Second
	c.Config.AttemptTimeout = time.Second
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	path := filepath.Join(mnt, "f")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(record("first"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}

	heal := c.stallQuorum(t)
	if _, err := f.WriteAt(record("uncertain"), 0); err != nil {
		t.Fatalf("write without a quorum: %v, want it queued", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync without a quorum: %v, want EIO (uncertain)", err)
	}
	// The program moves on before the transport heals: the same slot
	// again and the next slot; then, healed, a truncate that grows the file.
	if _, err := f.WriteAt(record("after"), 0); err != nil {
		t.Fatalf("write after the uncertain one: %v", err)
	}
	if _, err := f.WriteAt(record("next"), 4096); err != nil {
		t.Fatalf("write of the next slot: %v", err)
	}
	heal()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync once the quorum is back: %v, want success", err)
	}
	if err := f.Truncate(3 * 4096); err != nil {
		t.Fatalf("truncate after the heal: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	want := append(append(record("after"), record("next")...), make([]byte, 4096)...)
	if got := c.readBack(t)("f"); !bytes.Equal(got, want) {
		t.Fatalf("the volume holds %q... (%d bytes) in the first slot: the uncertain write applied after what followed it, or with other bytes",
			got[:min(len(got), 16)], len(got))
	}
}
