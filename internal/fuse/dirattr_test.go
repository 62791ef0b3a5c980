package fuse_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
)

// TestDirectoryAttributesMatchTheEngineAfterEveryChange: a single-writer
// mount answers a directory's GETATTR from attributes it derives from its
// own changes (dirattr.go); after each kind of change they must equal what
// the coordinator reports.
func TestDirectoryAttributesMatchTheEngineAfterEveryChange(t *testing.T) {
	c := startCluster(t, 1<<30)
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	cl := c.Dial(t)
	defer cl.Close()
	dir := filepath.Join(mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"create", func() { f, err := os.Create(p("f")); must(err); must(f.Close()) }},
		{"mkdir", func() { must(os.Mkdir(p("sub"), 0o755)) }},
		{"mknod (FIFO)", func() { must(unix.Mkfifo(p("fifo"), 0o644)) }},
		{"symlink", func() { must(os.Symlink("f", p("link"))) }},
		{"hard link", func() { must(os.Link(p("f"), p("f2"))) }},
		{"unlink", func() { must(os.Remove(p("f2"))) }},
		{"rename within", func() { must(os.Rename(p("fifo"), p("fifo2"))) }},
		{"rename a directory out", func() { must(os.Rename(p("sub"), filepath.Join(mnt, "sub"))) }},
		{"rmdir", func() { must(os.Mkdir(p("gone"), 0o755)); must(os.Remove(p("gone"))) }},
		{"exchange two directories across parents", func() {
			must(os.Mkdir(p("x"), 0o755))
			must(os.Mkdir(filepath.Join(mnt, "y"), 0o755))
			must(os.Mkdir(p("x/in"), 0o755))
			// Stat both so the mount holds their attributes, then swap them.
			for _, q := range []string{p("x"), filepath.Join(mnt, "y")} {
				_, err := os.Stat(q)
				must(err)
			}
			must(unix.Renameat2(unix.AT_FDCWD, p("x"), unix.AT_FDCWD, filepath.Join(mnt, "y"), unix.RENAME_EXCHANGE))
		}},
		{"setxattr", func() { must(unix.Setxattr(dir, "user.k", []byte("v"), 0)) }},
		{"chmod", func() { must(os.Chmod(dir, 0o750)) }},
		{"create after the inexact changes", func() { f, err := os.Create(p("g")); must(err); must(f.Close()) }},
	}
	for _, s := range steps {
		s.do()
		must(fsyncPath(dir))
		for _, d := range []string{dir, mnt, p("x"), filepath.Join(mnt, "y"), p("f"), p("g")} {
			if _, err := os.Lstat(d); os.IsNotExist(err) {
				continue
			}
			var st syscall.Stat_t
			must(syscall.Stat(d, &st))
			a, err := cl.GetAttr(context.Background(), st.Ino)
			must(err)
			if st.Mtim.Nano() != a.Mtime || st.Ctim.Nano() != a.Ctime || uint64(st.Nlink) != uint64(a.Nlink) ||
				st.Mode != a.Mode || st.Uid != a.UID || st.Gid != a.GID {
				t.Fatalf("after %s, %s shows mtime %d ctime %d nlink %d mode %o; the engine has %d %d %d %o",
					s.name, d, st.Mtim.Nano(), st.Ctim.Nano(), st.Nlink, st.Mode, a.Mtime, a.Ctime, a.Nlink, a.Mode)
			}
		}
	}
}

// TestAbsentXattrsAnsweredByTheMountFollowItsOwnChanges: a single-writer
// mount remembers extended attribute names it found absent (xattr.go);
// setting and removing one through the mount must be seen at once.
func TestAbsentXattrsAnsweredByTheMountFollowItsOwnChanges(t *testing.T) {
	c := startCluster(t, 1<<30)
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	p := filepath.Join(mnt, "x")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	get := func() (string, error) {
		n, err := unix.Getxattr(p, "user.k", buf)
		if err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	for round := range 2 {
		if _, err := get(); err != syscall.ENODATA {
			t.Fatalf("round %d: an absent attribute must answer ENODATA, got %v", round, err)
		}
		if err := unix.Setxattr(p, "user.k", []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
		if v, err := get(); err != nil || v != "v" {
			t.Fatalf("round %d: after setxattr the value must read back, got %q, %v", round, v, err)
		}
		if err := unix.Removexattr(p, "user.k"); err != nil {
			t.Fatal(err)
		}
	}
}
