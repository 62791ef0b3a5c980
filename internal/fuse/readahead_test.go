package fuse_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
)

// bdiWindow is the kernel's readahead window of the mount at target.
func bdiWindow(t *testing.T, target string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("/sys/class/bdi", fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)), "read_ahead_kb"))
	if err != nil {
		t.Fatalf("read the mount's readahead window: %v", err)
	}
	kb, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		t.Fatal(err)
	}
	return kb << 10
}

// TestMountRaisesTheKernelsReadAheadWindow: without it the kernel reads a
// FUSE file 128 KiB at a time, one or two requests in flight, whatever
// max_readahead the mount negotiated (docs/performance.md, "Reads").
func TestMountRaisesTheKernelsReadAheadWindow(t *testing.T) {
	c := startCluster(t, 64<<20)
	for _, tc := range []struct {
		name string
		opt  cfuse.Options
		want int
	}{
		{"default", cfuse.Options{SingleWriter: true}, cfuse.ReadAheadWindow},
		{"chosen", cfuse.Options{SingleWriter: true, ReadOnly: true, ReadAheadWindow: 2 << 20}, 2 << 20},
		{"kernel's own", cfuse.Options{ReadOnly: true, ReadAheadWindow: -1}, 128 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := c.mount(t, tc.opt)
			if got := bdiWindow(t, mnt); got != tc.want {
				t.Fatalf("readahead window %d bytes, want %d", got, tc.want)
			}
		})
	}
}
