package powercut

import (
	"os"
	"testing"
)

// MountT mounts a power-cut filesystem over a fresh empty backing
// directory for the test, unmounting it when the test ends (after the
// cleanups registered later, such as killing the processes that use it).
// It skips the test where FUSE cannot be mounted directly.
func MountT(t testing.TB) *FS {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("the power-cut filesystem mounts FUSE directly, which needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("the power-cut filesystem needs /dev/fuse: %v", err)
	}
	p, err := Mount(t.TempDir(), t.TempDir())
	if err != nil {
		t.Fatalf("mount the power-cut filesystem: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("unmount the power-cut filesystem: %v", err)
		}
	})
	return p
}

// CutT cuts power and fails the test if that fails.
func (p *FS) CutT(t testing.TB) Lost {
	t.Helper()
	lost, err := p.Cut()
	if err != nil {
		t.Fatalf("cut power on %s: %v", p.mountpoint, err)
	}
	return lost
}
