package mountowner

// Aborting a dead owner's FUSE connection. A killed owner normally takes its
// connection with it: the kernel aborts it when the last descriptor of
// /dev/fuse closes, and the mount answers ENOTCONN (stale.go). But a thread
// of the owner blocked in the kernel where a kill cannot reach it keeps the
// process, and so the descriptor, alive: a cache invalidation (go-fuse's
// NotifyEntry) waits for a directory's lock that a CREATE holds while it
// waits for this same owner's answer. The mount then hangs for ever, and so
// does every probe of it, statfs included. The nemesis found exactly this
// (docs/qualification.md, "Nemesis"). So a new owner aborts the connection
// of every mount its records name before it looks at the target: the
// kernel answers the waiting requests ENOTCONN, the blocked thread goes on
// and the old process exits. The connection is the mount's device minor
// number under the fusectl filesystem, mounted here if nobody has.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// fuseConnections is where the fusectl filesystem shows one directory per
// FUSE connection, named by the mount's device minor number.
const fuseConnections = "/sys/fs/fuse/connections"

// abortConnection aborts the FUSE connection of the mount at target, if
// target is a FUSE mount point. It reports whether it aborted one.
func abortConnection(target string) (bool, error) {
	minor, ok, err := fuseMinor(target)
	if err != nil || !ok {
		return false, err
	}
	if err := mountFusectl(); err != nil {
		return false, err
	}
	abort := filepath.Join(fuseConnections, fmt.Sprint(minor), "abort")
	if err := os.WriteFile(abort, []byte("1"), 0); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil // the connection ended meanwhile
		}
		return false, fmt.Errorf("abort the FUSE connection of %s: %w", target, err)
	}
	return true, nil
}

// fuseMinor finds target in this mount namespace's mount table: the device
// minor number of the FUSE mount on it, or ok false when none is.
func fuseMinor(target string) (minor uint32, ok bool, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return 0, false, fmt.Errorf("read the mount table: %w", err)
	}
	defer f.Close()
	clean := filepath.Clean(target)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, v := range fields {
			if v == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		if unescapeMountPath(fields[4]) != clean || !strings.HasPrefix(fields[sep+1], "fuse") {
			continue
		}
		var major uint32
		if _, err := fmt.Sscanf(fields[2], "%d:%d", &major, &minor); err != nil {
			return 0, false, fmt.Errorf("mount table entry %q: %w", fields[2], err)
		}
		ok = true // the last entry for a path is the one on top
	}
	return minor, ok, sc.Err()
}

// unescapeMountPath undoes the octal escapes (\040 for a space, ...) the
// kernel writes in mountinfo paths.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountFusectl mounts the fusectl filesystem unless it is mounted.
func mountFusectl() error {
	if entries, err := os.ReadDir(fuseConnections); err == nil && len(entries) > 0 {
		return nil
	}
	err := unix.Mount("fusectl", fuseConnections, "fusectl", 0, "")
	if err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mount fusectl at %s: %w", fuseConnections, err)
	}
	return nil
}

// dyingLockHolder finds the process holding the flock on the file at path
// (/proc/locks) and reports whether it is dying: killed, with a thread
// stuck in the kernel that the kill cannot reach. Its descriptors, the lock
// and its FUSE connections among them, stay open until that thread
// returns. When the stuck thread is another one, the main thread has
// exited and shows as a zombie; when it is the main thread itself, it
// shows uninterruptible with SIGKILL pending (killedOrZombie).
func dyingLockHolder(path string) (pid int, dying bool, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, false, fmt.Errorf("stat %s: %w", path, err)
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0, false, fmt.Errorf("read /proc/locks: %w", err)
	}
	for _, line := range strings.Split(string(locks), "\n") {
		// 1: FLOCK  ADVISORY  WRITE 4242 00:2a:1234567 0 EOF
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != want {
			continue
		}
		if _, err := fmt.Sscan(f[4], &pid); err != nil {
			return 0, false, fmt.Errorf("/proc/locks line %q: %w", line, err)
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return pid, false, nil // gone meanwhile
		}
		return pid, killedOrZombie(string(status)), nil
	}
	return 0, false, nil
}

// killedOrZombie reads /proc/PID/status: the main thread is a zombie, or
// SIGKILL is pending for the process (ShdPnd) or the thread (SigPnd).
func killedOrZombie(status string) bool {
	const sigkill = uint64(1) << (unix.SIGKILL - 1)
	for _, line := range strings.Split(status, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "State":
			if strings.HasPrefix(val, "Z") {
				return true
			}
		case "ShdPnd", "SigPnd":
			if mask, err := strconv.ParseUint(val, 16, 64); err == nil && mask&sigkill != 0 {
				return true
			}
		}
	}
	return false
}
