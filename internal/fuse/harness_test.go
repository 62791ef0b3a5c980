package fuse_test

// The test harness: a three-replica volume served by real replica-host
// processes (proccluster), and real FUSE mounts of it. The replica-host
// binary is built once per test binary, on the first cluster's start.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

var childBin string

func copyExecutable(from, to string) (string, error) {
	b, err := os.ReadFile(from)
	if err != nil {
		return "", err
	}
	return to, os.WriteFile(to, b, 0o755)
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Getenv(childEnv) != "" {
		return runChild()
	}
	if os.Getenv(createProgramEnv) != "" {
		return createProgram()
	}
	if os.Getuid() != 0 {
		fmt.Fprintln(os.Stderr, "internal/fuse tests mount real FUSE filesystems and need root")
		return 1
	}
	dir, err := os.MkdirTemp("", "fuse-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	defer proccluster.RemoveBinaries()
	// Unprivileged children re-execute this binary: give them a copy they
	// may reach.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if childBin, err = copyExecutable(os.Args[0], filepath.Join(dir, "fuse.test")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

type cluster struct{ *proccluster.Cluster }

func startCluster(t testing.TB, capacity uint64) *cluster {
	t.Helper()
	return &cluster{proccluster.Start(t, proccluster.Options{Capacity: capacity, Timing: proccluster.FastTiming})}
}

// mount mounts the volume at a fresh directory, unmounted in Cleanup.
func (c *cluster) mount(t testing.TB, opt cfuse.Options) string {
	t.Helper()
	target, _ := c.mountUntil(t, opt)
	return target
}

// mountUntil is mount, returning as well a function that unmounts the
// volume sooner (a benchmark's fresh mount per round, whose page cache
// would otherwise stay until the benchmark ends).
func (c *cluster) mountUntil(t testing.TB, opt cfuse.Options) (target string, unmount func()) {
	t.Helper()
	tmp := t.TempDir()
	target = filepath.Join(tmp, "mnt")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	// Unprivileged test users must reach the mount point.
	for _, d := range []string{tmp, filepath.Dir(tmp)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if opt.Volume == "" {
		opt.Volume = "vol"
	}
	cl := c.Dial(t)
	m, err := cfuse.MountVolume(context.Background(), target, cl, opt)
	if err != nil {
		cl.Close()
		t.Fatalf("mount the volume: %v", err)
	}
	unmount = sync.OnceFunc(func() { unmountForCleanup(t, m) })
	t.Cleanup(unmount)
	return target, unmount
}

func unmountForCleanup(t testing.TB, m *cfuse.Mount) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Unmount(ctx); err != nil {
		t.Errorf("unmount %s: %v", m.Target(), err)
		_ = unix.Unmount(m.Target(), unix.MNT_DETACH)
	}
}

// waitUntil is the FUSE tests' wait (poll.UntilTrue) with the one timeout
// they share.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.UntilTrue(t, 2*time.Minute, what, cond)
}
