package fuse_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// fsyncPath opens path (a file or directory) and fsyncs it.
func fsyncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Creates are committed before they are answered: kill -9 of every replica
// after they were closed and their directory fsynced, with the mount's
// client closed so that it sends nothing more (its process gone, as far as
// the volume can tell), loses none of them, and each has the inode number
// and times the mount told the kernel, and the data written into it.
func TestCreatesSurviveEveryHostKilledAfterTheirClose(t *testing.T) {
	c := startCluster(t, 1<<30)
	target := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	mcl := c.Dial(t)
	m, err := cfuse.MountVolume(context.Background(), target, mcl, cfuse.Options{Volume: "vol", SingleWriter: true})
	if err != nil {
		mcl.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { unmountForCleanup(t, m) })
	dir := filepath.Join(target, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const files = 300
	seen := map[string]syscall.Stat_t{}
	for i := range files {
		name := fmt.Sprint("f", i)
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := f.WriteString("data-" + name); err != nil {
				t.Fatal(err)
			}
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		seen[name] = st
		if err := f.Close(); err != nil {
			t.Fatalf("close %s: %v", name, err)
		}
	}
	if err := fsyncPath(dir); err != nil {
		t.Fatalf("fsync of the directory: %v", err)
	}
	for i := range 3 {
		c.Kill(i)
	}
	mcl.Close()
	for i := range 3 {
		c.Restart(i)
	}

	cl := c.Dial(t)
	defer cl.Close()
	ctx := context.Background()
	d, err := cl.Lookup(ctx, client.RootIno, "d")
	if err != nil {
		t.Fatal(err)
	}
	ents, err := cl.Readdir(ctx, d.Ino, 0, 2*files)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != files {
		t.Fatalf("the directory holds %d names after the kill, want all %d created before its fsync", len(ents), files)
	}
	for name, st := range seen {
		a, err := cl.Lookup(ctx, d.Ino, name)
		if err != nil {
			t.Fatalf("%s, created before the fsync, after the kill: %v", name, err)
		}
		if a.Ino != st.Ino || a.Ctime != st.Ctim.Nano() || a.Mode != st.Mode || a.UID != st.Uid {
			t.Fatalf("%s: the engine has inode %d ctime %d mode %o uid %d; the mount reported %d %d %o %d",
				name, a.Ino, a.Ctime, a.Mode, a.UID, st.Ino, st.Ctim.Nano(), st.Mode, st.Uid)
		}
	}
	for i := 0; i < files; i += 10 {
		name := fmt.Sprint("f", i)
		got, err := cl.Read(ctx, seen[name].Ino, 0, 100)
		if err != nil || string(got) != "data-"+name {
			t.Fatalf("%s holds %q (%v), want %q", name, got, err, "data-"+name)
		}
	}
}
