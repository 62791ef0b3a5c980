package fuse_test

// go-fuse's own loopback example as a benchmark baseline: a FUSE file
// system passing every request to a directory of this disk, with no
// replication, so the FUSE ceiling of this machine and kernel. It is built
// from the go-fuse module cellfleet already requires, unchanged, and run as
// its own process (its processor time is that process's). As root on
// Linux 6.9 or later its files are opened in passthrough mode, so its data
// never crosses /dev/fuse: the 1 MiB benchmarks also run the copying
// loopback (the same example without passthrough), the ceiling of a FUSE
// server that carries the data itself.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

// loopbackKind is which loopback program a baseline runs.
type loopbackKind struct {
	what string // for messages
	pkg  string
	args []string // before the mount point and the directory passed through
}

var (
	// passthroughLoopback is go-fuse's example, unchanged. Run by root on
	// this kernel it opens files in FUSE passthrough mode: the kernel
	// reads and writes the backing files itself.
	passthroughLoopback = loopbackKind{"go-fuse's loopback example",
		"github.com/hanwen/go-fuse/v2/example/loopback", []string{"-q", "-directmount"}}
	// copyingLoopback is the example without passthrough, with the
	// mount's request sizes and readahead window: every byte crosses
	// /dev/fuse and the server, as it does for the replicated mount
	// (fusetest/copyloopback).
	copyingLoopback = loopbackKind{"the copying loopback",
		"github.com/cellfleet/cellfleet/internal/fuse/fusetest/copyloopback", nil}
)

// loopback is one running mount of a loopback program.
type loopback struct {
	dir  string // the mount point
	orig string // the directory it passes through to
	cmd  *exec.Cmd
}

func (l *loopback) CPU() time.Duration { return proccluster.ProcessCPU(l.cmd.Process.Pid) }

// startLoopback mounts a loopback program over a fresh directory of this
// disk.
func startLoopback(b testing.TB, kind loopbackKind) *loopback {
	b.Helper()
	bin, err := proccluster.Binary(kind.pkg)
	if err != nil {
		b.Fatalf("build %s: %v", kind.what, err)
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
	l.cmd = exec.Command(bin, append(slices.Clone(kind.args), l.dir, l.orig)...)
	l.cmd.Stdout, l.cmd.Stderr = os.Stderr, os.Stderr
	if err := l.cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", kind.what, err)
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
	waitUntil(b, kind.what+" is mounted", func() bool {
		var st unix.Stat_t
		return unix.Stat(l.dir, &st) == nil && st.Dev != before.Dev
	})
	return l
}

// The copying loopback carries every byte written through its mount itself
// (its write(2) calls to the backing file add up to them), where
// go-fuse's example, opened in passthrough mode, carries none: the reason
// the 1 MiB benchmarks run both.
func TestCopyingLoopbackCarriesTheDataItself(t *testing.T) {
	const size = 8 << 20
	carried := func(kind loopbackKind) int64 {
		l := startLoopback(t, kind)
		before := processWrites(t, l.cmd.Process.Pid)
		data := bytes.Repeat([]byte("carried "), size/8)
		if err := os.WriteFile(filepath.Join(l.dir, "f"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := fsyncPath(filepath.Join(l.dir, "f")); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(l.orig, "f"))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: the backing file holds %d bytes (%v), not the %d written", kind.what, len(got), err, size)
		}
		return processWrites(t, l.cmd.Process.Pid) - before
	}
	if n := carried(copyingLoopback); n < size {
		t.Fatalf("the copying loopback wrote %d bytes of the %d written through it: the kernel wrote the rest (passthrough)", n, size)
	}
	n := carried(passthroughLoopback)
	t.Logf("go-fuse's loopback example wrote %d bytes of the %d written through it", n, size)
}

// processWrites is the bytes process pid has written with write(2) and
// its kin so far (/proc/<pid>/io wchar).
func processWrites(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatalf("read the I/O counters of %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no wchar in /proc/%d/io: %q", pid, b)
	return 0
}
