package fuse_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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

// Creates a single-writer mount answers before their commit (createbehind.go)
// are durable once fsync of their directory returns: kill -9 of every
// replica right after it, with the mount's client closed so that it sends
// nothing more (its process gone, as far as the volume can tell), loses none
// of them, and each has the inode number and times the mount told the
// kernel, and the data written into it. Without the fsync's wait for the
// creates, the last ones are lost.
func TestCreatesAnsweredBeforeTheirCommitSurviveAPowerCutAfterFsync(t *testing.T) {
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

// A create the engine refuses after the mount answered it (here another
// client, outside the single-writer contract, made the name first) is
// reported by the next fsync of the file and of its directory, once each,
// and the kernel forgets the name, so it then shows the engine's file.
func TestACreateRefusedAfterItsAnswerIsReportedByFsyncAndForgotten(t *testing.T) {
	c := startCluster(t, 1<<30)
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	dir := filepath.Join(mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cl := c.Dial(t)
	defer cl.Close()
	ctx := context.Background()
	d, err := cl.Lookup(ctx, client.RootIno, "d")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := cl.Create(ctx, d.Ino, "x", 0o600, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The mount made d and knows no x in it: it answers at once.
	f, err := os.OpenFile(filepath.Join(dir, "x"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("create answered before its commit: %v, want success", err)
	}
	defer f.Close()
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync of the file whose create the engine refused: %v, want EIO", err)
	}
	if err := fsyncPath(dir); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync of its directory: %v, want EIO", err)
	}
	if err := fsyncPath(dir); err != nil {
		t.Fatalf("second fsync of the directory: %v, want success (reported once)", err)
	}
	fusetestWait(t, "the kernel to forget the refused name", func() bool {
		var st syscall.Stat_t
		return syscall.Stat(filepath.Join(dir, "x"), &st) == nil && st.Ino == theirs.Ino
	})
	// The mount's other creates in the directory still work and last.
	if err := os.WriteFile(filepath.Join(dir, "y"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsyncPath(dir); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := cl.Lookup(ctx, d.Ino, "y"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("y after the directory's fsync: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Quorum loss while a create answered before its commit is on its way: the
// file's close and the directory's fsync answer EIO once the client's retry
// budget is spent, the
// mount forgets the name, and once the quorum is back the mount and the
// engine agree on whether the file exists (an uncertain create may still
// commit), and new creates in the directory last.
func TestACreateAnsweredBeforeAQuorumLossIsReportedAndSettlesWithTheEngine(t *testing.T) {
	c := startCluster(t, 1<<30)
	c.Config.RetryBudget = 3 * time.Second
	c.Config.AttemptTimeout = time.Second
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	dir := filepath.Join(mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The mount's first create reserves its inode numbers (a commit).
	if err := os.WriteFile(filepath.Join(dir, "first"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Opened now: without a quorum the open itself would fail once the
	// failed create made the mount forget the directory's attributes.
	d0, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d0.Close()
	heal := c.loseQuorum(t)
	f, err := os.OpenFile(filepath.Join(dir, "x"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("create answered before its commit, without a quorum: %v, want success", err)
	}
	if err := f.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("close of the created file without a quorum: %v, want EIO", err)
	}
	if err := d0.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync of the directory without a quorum: %v, want EIO", err)
	}
	heal()
	cl := c.Dial(t)
	defer cl.Close()
	ctx := context.Background()
	d, err := cl.Lookup(ctx, client.RootIno, "d")
	if err != nil {
		t.Fatal(err)
	}
	fusetestWait(t, "the mount and the engine to agree on x", func() bool {
		a, eerr := cl.Lookup(ctx, d.Ino, "x")
		var st syscall.Stat_t
		merr := syscall.Stat(filepath.Join(dir, "x"), &st)
		switch {
		case eerr == nil && merr == nil:
			return a.Ino == st.Ino
		case errors.Is(eerr, syscall.ENOENT) && errors.Is(merr, syscall.ENOENT):
			return true
		}
		t.Logf("engine: %v, mount: %v", eerr, merr)
		return false
	})
	_, err = cl.Lookup(ctx, d.Ino, "x")
	t.Logf("after the quorum came back, the uncertain create of x is on the volume: %v", err == nil)
	if err := os.WriteFile(filepath.Join(dir, "y"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsyncPath(dir); err != nil {
		t.Fatalf("fsync of the directory with the quorum back: %v", err)
	}
	if _, err := cl.Lookup(ctx, d.Ino, "y"); err != nil {
		t.Fatalf("y after the directory's fsync: %v", err)
	}
}
