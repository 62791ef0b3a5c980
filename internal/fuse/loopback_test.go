package fuse_test

// go-fuse's own loopback example as a benchmark baseline: a FUSE file
// system passing every request to a directory of this disk, with no
// replication, so the FUSE ceiling of this machine and kernel. It is built
// from the go-fuse module cellfleet already requires, unchanged, and run as
// its own process (its processor time is that process's).

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/fuse/fusetest"
)

const loopbackPkg = "github.com/hanwen/go-fuse/v2/example/loopback"

var loopbackBuild struct {
	once sync.Once
	bin  string
	err  error
}

// loopback is one running mount of the example.
type loopback struct {
	dir  string // the mount point
	orig string // the directory it passes through to
	cmd  *exec.Cmd
}

func (l *loopback) CPU() time.Duration { return fusetest.ProcessCPU(l.cmd.Process.Pid) }

// startLoopback mounts the example over a fresh directory of this disk.
func startLoopback(b *testing.B) *loopback {
	b.Helper()
	loopbackBuild.once.Do(func() {
		dir := filepath.Dir(replicaHostBin)
		loopbackBuild.bin, loopbackBuild.err = fusetest.BuildPackage(dir, loopbackPkg)
	})
	if loopbackBuild.err != nil {
		b.Fatalf("build go-fuse's loopback example: %v", loopbackBuild.err)
	}
	tmp := b.TempDir()
	l := &loopback{dir: filepath.Join(tmp, "loop"), orig: filepath.Join(tmp, "orig")}
	for _, d := range []string{l.dir, l.orig} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	var before unix.Stat_t
	if err := unix.Stat(l.dir, &before); err != nil {
		b.Fatal(err)
	}
	l.cmd = exec.Command(loopbackBuild.bin, "-q", "-directmount", l.dir, l.orig)
	l.cmd.Stdout, l.cmd.Stderr = os.Stderr, os.Stderr
	if err := l.cmd.Start(); err != nil {
		b.Fatalf("start the loopback example: %v", err)
	}
	b.Cleanup(func() {
		_ = l.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = l.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = unix.Unmount(l.dir, unix.MNT_DETACH)
			_ = l.cmd.Process.Kill()
			<-done
		}
	})
	// Mounted once the mount point is another device.
	fusetestWait(b, "the loopback example is mounted", func() bool {
		var st unix.Stat_t
		return unix.Stat(l.dir, &st) == nil && st.Dev != before.Dev
	})
	return l
}
