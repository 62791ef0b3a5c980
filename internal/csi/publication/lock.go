package publication

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked: another supervisor holds the publication lock of the root.
var ErrLocked = errors.New("publication lock is held by another supervisor")

// Lock is the dedicated publication lock of one consumer mount root. It is
// a flock on a file BESIDE the root (not in the plugin's private state dir),
// so two supervisors given different state roots but the same consumer
// root still exclude each other. The kernel drops it when the process dies,
// so a killed plugin never leaves it stale.
type Lock struct {
	f    *os.File
	path string
}

// LockPath is where the lock of consumerRoot lives: "<root>.publication.lock".
func LockPath(consumerRoot string) string {
	return filepath.Clean(consumerRoot) + ".publication.lock"
}

// AcquireLock takes the lock without waiting and writes owner (e.g. pid and
// state dir) into it so a refused supervisor can name the holder.
func AcquireLock(consumerRoot, owner string) (*Lock, error) {
	p := LockPath(consumerRoot)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open publication lock %s: %w", p, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(p)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s (held by %s): %w", p, strings.TrimSpace(string(holder)), ErrLocked)
		}
		return nil, fmt.Errorf("flock %s: %w", p, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("truncate publication lock %s: %w", p, err)
	}
	if _, err := f.WriteAt([]byte(owner+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("write publication lock owner %s: %w", p, err)
	}
	return &Lock{f: f, path: p}, nil
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Release drops the lock.
func (l *Lock) Release() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("release publication lock %s: %w", l.path, err)
	}
	return nil
}
