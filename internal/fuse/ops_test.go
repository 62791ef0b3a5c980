package fuse_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
)

// TestOperations covers what posixtest does not: capacity, rename flags,
// FIFOs, locks between processes and read-only mounts.
func TestOperations(t *testing.T) {
	const capacity = 8 << 20
	c := startCluster(t, capacity)
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	p := func(name string) string { return filepath.Join(mnt, name) }

	t.Run("statfs reports the volume's capacity", func(t *testing.T) {
		var st unix.Statfs_t
		if err := unix.Statfs(mnt, &st); err != nil {
			t.Fatal(err)
		}
		if got := st.Blocks * uint64(st.Bsize); got != capacity {
			t.Fatalf("statfs reports %d bytes, the volume has %d", got, capacity)
		}
	})
	t.Run("writes past the capacity fail with ENOSPC", func(t *testing.T) {
		f, err := os.Create(p("big"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		var werr error
		for i := 0; i < 16 && werr == nil; i++ {
			_, werr = f.Write(buf)
		}
		if werr == nil {
			werr = f.Sync()
		}
		if !errors.Is(werr, syscall.ENOSPC) {
			t.Fatalf("writing 16 MiB to an 8 MiB volume must fail with ENOSPC, got %v", werr)
		}
		f.Close()
		if err := os.Remove(p("big")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("RENAME_NOREPLACE refuses an existing target", func(t *testing.T) {
		for _, n := range []string{"nr-a", "nr-b"} {
			if err := os.WriteFile(p(n), []byte(n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		err := unix.Renameat2(unix.AT_FDCWD, p("nr-a"), unix.AT_FDCWD, p("nr-b"), unix.RENAME_NOREPLACE)
		if !errors.Is(err, syscall.EEXIST) {
			t.Fatalf("RENAME_NOREPLACE onto an existing name: %v, want EEXIST", err)
		}
		if err := unix.Renameat2(unix.AT_FDCWD, p("nr-a"), unix.AT_FDCWD, p("nr-c"), unix.RENAME_NOREPLACE); err != nil {
			t.Fatalf("RENAME_NOREPLACE onto a free name: %v", err)
		}
	})
	t.Run("RENAME_EXCHANGE swaps two names", func(t *testing.T) {
		for _, n := range []string{"ex-a", "ex-b"} {
			if err := os.WriteFile(p(n), []byte(n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := unix.Renameat2(unix.AT_FDCWD, p("ex-a"), unix.AT_FDCWD, p("ex-b"), unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(p("ex-a"))
		b, _ := os.ReadFile(p("ex-b"))
		if string(a) != "ex-b" || string(b) != "ex-a" {
			t.Fatalf("after RENAME_EXCHANGE ex-a holds %q and ex-b %q, want them swapped", a, b)
		}
	})
	t.Run("mknod makes a working FIFO", func(t *testing.T) {
		if err := unix.Mkfifo(p("fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(p("fifo"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			t.Fatalf("fifo mode %#o, %v", st.Mode, err)
		}
		done := make(chan string, 1)
		go func() {
			b, _ := os.ReadFile(p("fifo"))
			done <- string(b)
		}()
		if err := os.WriteFile(p("fifo"), []byte("through the pipe"), 0); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-done:
			if got != "through the pipe" {
				t.Fatalf("read %q from the FIFO", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("nothing came through the FIFO")
		}
	})
	for _, kind := range []string{"flock", "posix"} {
		t.Run(kind+" locks conflict between processes", func(t *testing.T) {
			name := p("lock-" + kind)
			if err := os.WriteFile(name, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			release := holdLock(t, kind+"-hold", name)
			f, err := os.OpenFile(name, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			try := func() error {
				if kind == "flock" {
					return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
				}
				return unix.FcntlFlock(f.Fd(), unix.F_SETLK, &unix.Flock_t{Type: unix.F_WRLCK})
			}
			if err := try(); !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EAGAIN) {
				t.Fatalf("a %s lock held by another process must refuse ours, got %v", kind, err)
			}
			release()
			waitUntil(t, "the lock to become free after its holder exited", func() bool { return try() == nil })
		})
	}
	t.Run("a read-only mount refuses writes", func(t *testing.T) {
		ro := c.mount(t, cfuse.Options{ReadOnly: true})
		if _, err := os.ReadFile(filepath.Join(ro, "ex-a")); err != nil {
			t.Fatalf("read through a read-only mount: %v", err)
		}
		err := os.WriteFile(filepath.Join(ro, "new"), nil, 0o644)
		if !errors.Is(err, syscall.EROFS) {
			t.Fatalf("create on a read-only mount: %v, want EROFS", err)
		}
	})
}

// holdLock makes a child process take a lock on path and hold it until the
// returned function is called.
func holdLock(t *testing.T, op, path string) func() {
	t.Helper()
	cmd := exec.Command(childBin, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+`={"op":"`+op+`","path":"`+path+`"}`)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "LOCKED" {
		t.Fatalf("lock holder: %q", line)
	}
	release := func() { stdin.Close(); _ = cmd.Wait() }
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return release
}

// TestQuorumLossAnswersEIO: with two of three replicas dead no write can be
// committed; fsync answers EIO (an uncertain or unavailable result) within
// the retry budget instead of claiming success, and the mount serves again
// once the replicas are back.
func TestQuorumLossAnswersEIO(t *testing.T) {
	c := startCluster(t, 1<<30)
	c.Config.RetryBudget = 3 * time.Second
	c.Config.AttemptTimeout = time.Second
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	f, err := os.OpenFile(filepath.Join(mnt, "f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("committed")); err != nil {
		t.Fatal(err)
	}
	coord := c.Coordinator(t)
	var dead []int
	for i := range 3 {
		if i != coord {
			c.Kill(i)
			dead = append(dead, i)
		}
	}
	_, werr := f.WriteAt([]byte("no quorum"), 100)
	if werr == nil {
		werr = f.Sync()
	}
	if !errors.Is(werr, syscall.EIO) {
		t.Fatalf("a write without a quorum must fail with EIO, got %v", werr)
	}
	for _, i := range dead {
		c.Restart(i)
	}
	waitUntil(t, "writes to commit again once a quorum is back", func() bool {
		_, err := f.WriteAt([]byte("quorum back"), 200)
		return err == nil && f.Sync() == nil
	})
}
