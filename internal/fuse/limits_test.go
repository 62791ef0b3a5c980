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
// file at 2^50 bytes (1 PiB; the kernel's own bound for FUSE is 2^63-1);
// truncating or writing past it answers EFBIG, not the ENOSPC of a size
// within the bound, and leaves the file as it was.
func TestTruncatePastTheLargestFileSizeAnswersEFBIG(t *testing.T) {
	const maxFileSize = 1 << 50 // docs/fuse.md, ## Operations
	c := startCluster(t, 64<<20)
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	path := filepath.Join(mnt, "big")
	if err := os.WriteFile(path, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1<<40); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("truncate to 1 TiB, within the file size bound but past the 64 MiB volume: %v, want ENOSPC", err)
	}
	for _, size := range []int64{maxFileSize + 1, 1 << 62} {
		if err := os.Truncate(path, size); !errors.Is(err, syscall.EFBIG) && !errors.Is(err, syscall.EINVAL) {
			t.Errorf("truncate to %d bytes: %v, want EFBIG", size, err)
		}
	}
	// With write-behind the write is answered once queued and the engine's
	// refusal comes back at close.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, werr := f.WriteAt([]byte("x"), maxFileSize)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if !errors.Is(werr, syscall.EFBIG) {
		t.Errorf("a write at byte %d: %v (at the write or the close), want EFBIG", int64(maxFileSize), werr)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "keep" {
		t.Errorf("the file after the refused changes holds %q (%v), want \"keep\"", got, err)
	}
}
