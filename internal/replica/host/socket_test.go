package host_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/host"
)

func TestAdminSocketIsPrivateReplacesAStaleSocketAndNeverTakesOverALiveOne(t *testing.T) {
	dir, err := os.MkdirTemp("", "rh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "state", "admin.sock")
	ln, err := host.ListenAdmin(sock)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{sock: 0o600, filepath.Dir(sock): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Fatalf("%s has permissions %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	if _, err := host.ListenAdmin(sock); err == nil || !strings.Contains(err.Error(), "another running host") {
		t.Fatalf("a second host must not take over a live admin socket, got %v", err)
	}
	// A host killed with SIGKILL leaves its socket file behind.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	ln, err = host.ListenAdmin(sock)
	if err != nil {
		t.Fatalf("a stale admin socket must be replaced: %v", err)
	}
	ln.Close()

	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := host.ListenAdmin(plain); err == nil {
		t.Fatalf("a regular file at the admin socket path must not be removed")
	}
	if _, err := host.ListenAdmin("/" + strings.Repeat("x", 120)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("a socket path past the kernel's limit must be refused clearly, got %v", err)
	}
}
