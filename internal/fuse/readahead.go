package fuse

// The kernel's readahead window of the mount. FUSE's backing device starts
// with the kernel's default window (VM_READAHEAD_PAGES, 128 KiB), and the
// max_readahead the mount negotiates can only lower it: so, whatever
// MaxReadAhead says, a sequential reader gets one 128 KiB READ at a time,
// each a coordinator round trip with a leadership check (1-2 requests in
// flight, measured: docs/performance.md, "Reads"). The window is a property
// of the mount's backing device (/sys/class/bdi/<major>:<minor>), which
// root may raise once the mount exists; the kernel then sends 1 MiB READs
// (max_pages) several at a time, and the coordinator answers them under one
// shared leadership check (replica/leader.go).

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// ReadAheadWindow is the default readahead window of a mount: enough for
// eight 1 MiB READs in flight.
const ReadAheadWindow = 8 << 20

// maxReadAheadWindow bounds Options.ReadAheadWindow (the page cache a single
// sequential reader may hold ahead of itself).
const maxReadAheadWindow = 64 << 20

// bdiRoot is where the kernel lists backing devices (a variable: a test
// points it where the write is refused).
var bdiRoot = "/sys/class/bdi"

// SetReadAheadWindow sets the readahead window of the FUSE mount at target to
// bytes.
func SetReadAheadWindow(target string, bytes int) error {
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		return fmt.Errorf("stat the mount point: %w", err)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	path := filepath.Join(bdiRoot, dev, "read_ahead_kb")
	if err := os.WriteFile(path, []byte(strconv.Itoa(bytes>>10)), 0); err != nil {
		return fmt.Errorf("set the readahead window of backing device %s: %w", dev, err)
	}
	return nil
}
