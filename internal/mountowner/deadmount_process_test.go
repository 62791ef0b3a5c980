package mountowner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDescriptorsOfAKilledOwnersMountNeverReadPastTheNextMountsWrites: a
// reader keeps a file and its directory open on a mount whose owner is
// killed with SIGKILL. Once the next owner's mount has written a new value
// and a new name, the old descriptors must not answer from the kernel's
// caches of the dead mount: a read returning the old value, or a lookup
// saying the new name does not exist, would be a stale read
// (docs/fuse.md, "Fencing").
func TestDescriptorsOfAKilledOwnersMountNeverReadPastTheNextMountsWrites(t *testing.T) {
	c := startVolume(t)
	base := t.TempDir()
	state, socket, target := filepath.Join(base, "state"), filepath.Join(base, "owner.sock"), filepath.Join(base, "staging")
	if err := os.Mkdir(target, 0o750); err != nil {
		t.Fatal(err)
	}
	cleanupMount(t, target)
	ctx := context.Background()
	owner := startOwner(t, state, socket)
	if _, err := owner.client.Mount(ctx, mountRequest(t, c, target)); err != nil {
		t.Fatalf("mount through the owner: %v", err)
	}
	reg := filepath.Join(target, "reg")
	writeSynced(t, reg, "value-1")

	// The reader's descriptors, with the kernel's caches warm: the page and
	// attributes of reg, and the negative entry of a name not yet created.
	old, err := os.Open(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	// Exactly the file's length: a read past the cached size would make the
	// kernel ask the server whatever its caches hold.
	buf := make([]byte, len("value-1"))
	if _, err := old.ReadAt(buf, 0); err != nil || string(buf) != "value-1" {
		t.Fatalf("read through the first mount: %q, %v", buf, err)
	}
	oldDir, err := unix.Open(target, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(oldDir)
	var st unix.Stat_t
	if err := unix.Fstatat(oldDir, "later", &st, 0); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup of a name not yet created: %v, want ENOENT", err)
	}

	owner.kill()
	owner2 := startOwner(t, state, socket)
	if _, err := owner2.client.Mount(ctx, mountRequest(t, c, target)); err != nil {
		t.Fatalf("mount again through the next owner: %v", err)
	}
	writeSynced(t, reg, "value-2")
	writeSynced(t, filepath.Join(target, "later"), "created by the next mount")

	if n, err := old.ReadAt(buf, 0); err == nil {
		t.Errorf("a descriptor of the dead mount read %q after the next mount wrote value-2", buf[:n])
	} else {
		t.Logf("read through the dead mount's descriptor: %v", err)
	}
	if err := unix.Fstatat(oldDir, "later", &st, 0); errors.Is(err, syscall.ENOENT) {
		t.Errorf("a directory descriptor of the dead mount says %q does not exist after the next mount created it", "later")
	} else {
		t.Logf("lookup through the dead mount's directory: %v", err)
	}
}

// writeSynced replaces path's content and fsyncs it.
func writeSynced(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", path, err)
	}
}
