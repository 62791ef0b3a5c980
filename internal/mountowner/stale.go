package mountowner

// Stale mounts. When the process holding a FUSE session dies, the kernel
// aborts the connection and every request to the mount answers ENOTCONN
// ("transport endpoint is not connected") until someone unmounts it. A stat
// may still be answered from the kernel's attribute cache, so the probe asks
// statfs, which the kernel never caches. A restarted owner finds such mounts through its records and cleans
// them: a plain unmount, or a lazy (detach) unmount when a process still has
// files open there.

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// targetState is what a stat of a target says.
type targetState int

const (
	targetAbsent   targetState = iota // no such directory
	targetPlain                       // a directory, not our mount (or a healthy one)
	targetStale                       // a mount whose FUSE server is gone
	targetMounted                     // a mount point (st_dev differs from the parent's)
	targetUnusable                    // any other error
)

func probe(target string) (targetState, error) {
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); errors.Is(err, syscall.ENOTCONN) {
		return targetStale, err
	}
	var st, parent unix.Stat_t
	err := unix.Stat(target, &st)
	switch {
	case errors.Is(err, syscall.ENOTCONN):
		return targetStale, err
	case errors.Is(err, syscall.ENOENT):
		return targetAbsent, err
	case err != nil:
		return targetUnusable, err
	}
	if err := unix.Stat(target+"/..", &parent); err != nil {
		return targetUnusable, err
	}
	if st.Dev != parent.Dev || st.Ino == parent.Ino {
		return targetMounted, nil
	}
	return targetPlain, nil
}

// detach unmounts target, lazily when it is busy.
func detach(target string) error {
	err := unix.Unmount(target, 0)
	if errors.Is(err, syscall.EBUSY) {
		err = unix.Unmount(target, unix.MNT_DETACH)
	}
	if errors.Is(err, syscall.EINVAL) {
		return nil // not a mount point (any more)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}

// ensureDir checks that target is an existing directory to mount on.
func ensureDir(target string) error {
	fi, err := os.Stat(target)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("target %s is not a directory", target)
	}
	return nil
}
