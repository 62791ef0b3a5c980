package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/testfs/powercut"
)

// disk is one host's disk: a size-limited tmpfs (so that it can be filled:
// the full-disk fault) holding a backing directory that a power-cut
// filesystem served by this process shows to the host (so that it can be
// frozen, the stalled-disk fault, and lose everything not synced, the
// power-cut fault). The ballast that fills it sits on the tmpfs beside the
// backing directory, out of the power-cut model.
type disk struct {
	root    string // tmpfs mount point
	backing string // root/backing
	mnt     string // the power-cut mount the host uses
	pc      *powercut.FS
	tmpfs   bool
}

func newDisk(root string, mib int) (*disk, error) {
	d := &disk{root: root, backing: filepath.Join(root, "backing"), mnt: root + "-mnt"}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, fmt.Sprintf("size=%dm,mode=0755", mib)); err != nil {
		return nil, fmt.Errorf("mount a %d MiB tmpfs at %s: %w", mib, root, err)
	}
	d.tmpfs = true
	for _, p := range []string{d.backing, d.mnt} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return d, err
		}
	}
	pc, err := powercut.Mount(d.backing, d.mnt)
	if err != nil {
		return d, fmt.Errorf("power-cut mount of %s: %w", d.backing, err)
	}
	d.pc = pc
	return d, nil
}

func (d *disk) ballastPath() string { return filepath.Join(d.root, "ballast") }

// fill takes every free byte of the tmpfs, so the host's next allocation
// fails with ENOSPC.
func (d *disk) fill() (int64, error) {
	f, err := os.OpenFile(d.ballastPath(), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Statfs(d.root, &st); err != nil {
		return 0, err
	}
	free := int64(st.Bavail) * st.Bsize
	if free > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, free); err != nil && !errors.Is(err, unix.ENOSPC) {
			return 0, fmt.Errorf("fallocate %d bytes: %w", free, err)
		}
	}
	// Whatever fallocate left (rounding), page by page.
	buf := make([]byte, 4096)
	off, _ := f.Seek(0, 2)
	for {
		if _, err := f.WriteAt(buf, off); err != nil {
			break
		}
		off += int64(len(buf))
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (d *disk) drain() error {
	err := os.Remove(d.ballastPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// close unmounts the power-cut filesystem (lazily if a process still uses
// it) and the tmpfs.
func (d *disk) close() {
	if d.pc != nil {
		if err := d.pc.Close(); err != nil {
			_ = unix.Unmount(d.mnt, unix.MNT_DETACH)
		}
		d.pc = nil
	}
	if d.tmpfs {
		if err := unix.Unmount(d.root, 0); err != nil {
			_ = unix.Unmount(d.root, unix.MNT_DETACH)
		}
		d.tmpfs = false
	}
}
