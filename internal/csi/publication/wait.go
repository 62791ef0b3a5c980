package publication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
)

// WaitForBind blocks until a mount is visible exactly at path in the
// caller's own mount namespace, or ctx ends.
//
// Why: the plugin makes the bind in the host namespace; it reaches the
// replica host's container through HostToContainer propagation, which is
// asynchronous from the consumer's point of view. Until the bind shows in
// the consumer's /proc/self/mountinfo, path is the bare directory of the
// container's view, and reading authority or initialising a worker there
// would write to the wrong filesystem. The kernel signals every change of
// the mount table by POLLPRI on an open mountinfo file, so the wait is
// event-driven; a one-second re-check bounds any missed wake-up.
func WaitForBind(ctx context.Context, path string) error {
	return waitForBind(ctx, mountpath.SelfMountInfo, filepath.Clean(path))
}

func waitForBind(ctx context.Context, mountinfo, path string) error {
	f, err := os.Open(mountinfo)
	if err != nil {
		return fmt.Errorf("open %s: %w", mountinfo, err)
	}
	defer f.Close()
	for {
		ok, err := mountpath.IsMountPoint(mountinfo, path)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("wait for bind at %s to appear in this mount namespace: %w", path, err)
		}
		// The open file remembers the mount-table event count it last
		// reported; poll returns at once if the table changed since, so a
		// mount made between the check above and this poll is not missed.
		wait := time.Second
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			wait = max(time.Until(dl), time.Millisecond)
		}
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, int(wait.Milliseconds())); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll %s: %w", mountinfo, err)
		}
	}
}
