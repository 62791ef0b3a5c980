package fuse_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// TestNamesLongerThan255BytesFailWithENAMETOOLONG: every operation that
// takes a name refuses one of 256 bytes (NAME_MAX, what statfs reports)
// with ENAMETOOLONG, and accepts one of exactly 255. The kernel passes
// names up to 1024 bytes to a FUSE filesystem, so the mount must check.
func TestNamesLongerThan255BytesFailWithENAMETOOLONG(t *testing.T) {
	c := startCluster(t, 64<<20)
	for _, mode := range []struct {
		name         string
		singleWriter bool
	}{{"single-writer", true}, {"shared", false}} {
		t.Run(mode.name, func(t *testing.T) {
			mnt := filepath.Join(c.mount(t, cfuse.Options{SingleWriter: mode.singleWriter}), mode.name)
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			p := func(name string) string { return filepath.Join(mnt, name) }
			if err := os.WriteFile(p("file"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := unix.Setxattr(p("file"), "user.short", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			ops := []struct {
				op  string
				run func(name string) error
			}{
				{"create", func(name string) error {
					f, err := os.OpenFile(p(name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
					if err == nil {
						err = f.Close()
					}
					return err
				}},
				{"mkdir", func(name string) error { return os.Mkdir(p(name), 0o755) }},
				{"mknod", func(name string) error { return unix.Mknod(p(name), unix.S_IFIFO|0o644, 0) }},
				{"symlink", func(name string) error { return os.Symlink("file", p(name)) }},
				{"link", func(name string) error { return os.Link(p("file"), p(name)) }},
				{"rename to", func(name string) error {
					if err := os.WriteFile(p("rename-src"), nil, 0o644); err != nil {
						t.Fatal(err)
					}
					return os.Rename(p("rename-src"), p(name))
				}},
				{"rename from", func(name string) error { return os.Rename(p(name), p("rename-dst")) }},
				{"lookup", func(name string) error { _, err := os.Lstat(p(name)); return err }},
				{"unlink", func(name string) error { return os.Remove(p(name)) }},
				{"rmdir", func(name string) error { return unix.Rmdir(p(name)) }},
			}
			long := strings.Repeat("n", 256)
			for _, o := range ops {
				if err := o.run(long); !errors.Is(err, syscall.ENAMETOOLONG) {
					t.Errorf("%s of a 256-byte name: %v, want ENAMETOOLONG", o.op, err)
				}
			}
			// A 255-byte name is allowed: each operation that makes a name
			// succeeds on a fresh one.
			for i, o := range ops[:6] {
				name := strings.Repeat(string(rune('a'+i)), 255)
				if err := o.run(name); err != nil {
					t.Errorf("%s of a 255-byte name: %v, want success", o.op, err)
				}
			}
			// Extended attribute names have their own limit (XATTR_NAME_MAX,
			// 255 bytes, checked by the kernel with ERANGE).
			if err := unix.Setxattr(p("file"), "user."+strings.Repeat("x", 251), []byte("v"), 0); !errors.Is(err, syscall.ERANGE) {
				t.Errorf("setxattr of a 256-byte attribute name: %v, want ERANGE", err)
			}
		})
	}
}

// TestTruncatePastTheLargestFileSizeAnswersEFBIG: the engine bounds a
// file at 2^50 bytes (1 PiB, wire.MaxFileSize; the kernel's own bound for
// FUSE is 2^63-1); truncating or writing past it answers EFBIG, not the
// ENOSPC of a size within the bound, and leaves the file as it was. The
// write is refused at once on both cache modes: with write-behind a write
// is otherwise answered once queued, and a refusal only at close is one
// most writers never check.
func TestTruncatePastTheLargestFileSizeAnswersEFBIG(t *testing.T) {
	c := startCluster(t, 64<<20)
	for _, mode := range []struct {
		name         string
		singleWriter bool
	}{{"single-writer", true}, {"shared", false}} {
		t.Run(mode.name, func(t *testing.T) {
			mnt := c.mount(t, cfuse.Options{SingleWriter: mode.singleWriter})
			path := filepath.Join(mnt, "big-"+mode.name)
			if err := os.WriteFile(path, []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, 1<<40); !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("truncate to 1 TiB, within the file size bound but past the 64 MiB volume: %v, want ENOSPC", err)
			}
			for _, size := range []int64{wire.MaxFileSize + 1, 1 << 62} {
				if err := os.Truncate(path, size); !errors.Is(err, syscall.EFBIG) && !errors.Is(err, syscall.EINVAL) {
					t.Errorf("truncate to %d bytes: %v, want EFBIG", size, err)
				}
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			// (A write that starts below the bound and crosses it is not
			// asked here: the kernel splits it at the page boundary, and the
			// part below the bound is the volume's ENOSPC.)
			for _, off := range []int64{wire.MaxFileSize, wire.MaxFileSize + 4096, 1 << 62} {
				if _, err := f.WriteAt([]byte("xy"), off); !errors.Is(err, syscall.EFBIG) {
					t.Errorf("a 2-byte write at byte %d: %v at the write, want EFBIG", off, err)
				}
			}
			if err := f.Close(); err != nil {
				t.Errorf("close after the refused writes: %v, want nothing left to report", err)
			}
			if got, err := os.ReadFile(path); err != nil || string(got) != "keep" {
				t.Errorf("the file after the refused changes holds %q (%v), want \"keep\"", got, err)
			}
		})
	}
}
