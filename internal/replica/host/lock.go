package host

// The state directory's lock: one replica-host per state directory. Two
// hosts on one directory would each believe they own its history and
// publication records, and two workers of one replica would run Raft on one
// data directory. The admin socket's liveness probe (socket.go) cannot
// exclude a second host: both may probe before either listens. A flock is
// taken without waiting before anything else at start, and the kernel drops
// it when the process dies, so a killed host never leaves it stale
// (docs/replica-engine.md, "replica-host").

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// LockName is the lock file's name in the state directory.
const LockName = "host.lock"

// ErrStateDirLocked: another replica-host holds the state directory.
var ErrStateDirLocked = errors.New("the state directory is in use by another replica-host")

// StateLock is a held lock of a state directory.
type StateLock struct {
	f *os.File
}

// LockStateDir creates the state directory if needed, takes its lock
// without waiting and writes this process's PID into the lock file, so a
// refused host names the holder. Hold the lock for the process's life.
func LockStateDir(stateDir string) (*StateLock, error) {
	if err := durable.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("host state directory: %w", err)
	}
	p := filepath.Join(stateDir, LockName)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the state directory's lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is held by %s: %w", p, lockHolder(p), ErrStateDirLocked)
		}
		return nil, fmt.Errorf("flock %s: %w", p, err)
	}
	if err := writePID(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("record the state directory's holder in %s: %w", p, err)
	}
	return &StateLock{f: f}, nil
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// lockHolder names the holder from the PID it wrote. The holder writes it
// just after taking the lock: a refusal in between says so.
func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	pid := strings.TrimSpace(string(b))
	if err != nil || pid == "" {
		return "a replica-host whose PID is not recorded yet"
	}
	return "replica-host pid " + pid
}

// Release drops the lock (the process's exit drops it too).
func (l *StateLock) Release() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("release the state directory's lock %s: %w", l.f.Name(), err)
	}
	return nil
}
