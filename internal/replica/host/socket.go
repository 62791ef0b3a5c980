package host

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// AdminSocketName is the admin socket's file name in the host's state
// directory unless the host is told another path.
const AdminSocketName = "admin.sock"

// maxSocketPath is sun_path's limit on Linux, including the final NUL.
const maxSocketPath = 108

// ListenAdmin creates the admin API's unix socket at path with mode 0600,
// in a directory it creates with mode 0700. A socket left by a host that
// died is replaced; one that a live host still serves is an error, never
// taken over.
//
// The socket is made under umask 0177 so that no other user can connect
// even between its creation and the chmod that follows. Call it before the
// process starts other goroutines that create files: the umask is
// process-wide.
func ListenAdmin(path string) (net.Listener, error) {
	if len(path) >= maxSocketPath {
		return nil, fmt.Errorf("admin socket path %s is %d bytes, the kernel's limit is %d", path, len(path), maxSocketPath-1)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("admin socket directory: %w", err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket mode: %w", err)
	}
	return ln, nil
}

func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("admin socket path %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("admin socket %s is served by another running host", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale admin socket: %w", err)
	}
	return nil
}
