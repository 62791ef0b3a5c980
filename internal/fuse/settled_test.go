package fuse_test

// An answered operation is settled (docs/fuse.md, "Semantics"): a successful
// fsync, or close of a descriptor open for writing, means every write made
// before it through that descriptor is committed on a quorum (a create is
// committed before it is answered), and a failure is never lost on the way
// to the program that made the write.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
)

// loseQuorum kills both replicas that are not the coordinator and returns a
// function that restarts them.
func (c *cluster) loseQuorum(t *testing.T) (heal func()) {
	t.Helper()
	dead := c.followers(t)
	for _, i := range dead {
		c.Kill(i)
	}
	return func() {
		for _, i := range dead {
			c.Restart(i)
		}
	}
}

// stallQuorum pauses both replicas that are not the coordinator (alive, but
// they answer nothing) and returns a function that resumes them. Resuming
// forks nothing, so it may heal the volume while this process holds files
// with writes queued (proccluster.Cluster.Pause).
func (c *cluster) stallQuorum(t *testing.T) (heal func()) {
	t.Helper()
	stalled := c.followers(t)
	for _, i := range stalled {
		c.Pause(i)
	}
	t.Logf("replicas %v stalled", stalled)
	return func() {
		for _, i := range stalled {
			c.Resume(i)
		}
	}
}

func (c *cluster) followers(t *testing.T) []int {
	coord := c.Coordinator(t)
	var f []int
	for i := range 3 {
		if i != coord {
			f = append(f, i)
		}
	}
	return f
}

// closeElsewhere makes the kernel send FLUSH for f's handle without the
// program closing f: a child process started and exec'd (every descriptor
// Go opens is close-on-exec, so exec closes the child's copy), and a dup'd
// descriptor closed.
func closeElsewhere(t *testing.T, f *os.File) {
	t.Helper()
	if err := exec.Command("true").Run(); err != nil {
		t.Fatalf("run a child process: %v", err)
	}
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Close(fd) // its FLUSH may report the failure; that is allowed
}

// TestAFailureSurvivesClosesTheWriterDidNotMake is the regression test of
// the acknowledged writes lost under host kills: a write-behind failure
// (refused, or uncertain when the quorum is lost) was consumed by the FLUSH
// the kernel sends when any descriptor of the handle is closed, including
// the copy a child process closes at exec. The writer's own fsync then
// answered 0, and the program never rewrote the record it had lost.
func TestAFailureSurvivesClosesTheWriterDidNotMake(t *testing.T) {
	const capacity = 16 << 20
	c := startCluster(t, capacity)
	c.Config.RetryBudget = 3 * time.Second
	c.Config.AttemptTimeout = time.Second
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})

	for _, tc := range []struct {
		name string
		want syscall.Errno
		// fail makes a queued write to f fail after it was answered and
		// returns what undoes the fault.
		fail func(t *testing.T, f *os.File) (undo func())
	}{
		{"refused", syscall.ENOSPC, func(t *testing.T, f *os.File) func() {
			if _, err := f.WriteAt(make([]byte, 4096), capacity); err != nil {
				t.Fatalf("the queued write past the capacity must be answered first, got %v", err)
			}
			return func() {}
		}},
		{"uncertain", syscall.EIO, func(t *testing.T, f *os.File) func() {
			heal := c.loseQuorum(t)
			if _, err := f.WriteAt(make([]byte, 4096), 4096); err != nil {
				t.Fatalf("the queued write must be answered before its commit, got %v", err)
			}
			return heal
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(mnt, tc.name)
			f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("committed"), 0); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			undo := tc.fail(t, f)
			// A stat waits for the file's queued writes: the failure is
			// known once it returns.
			if _, err := os.Stat(path); err != nil && !errors.Is(err, syscall.EIO) {
				t.Fatal(err)
			}
			closeElsewhere(t, f)
			if err := f.Sync(); !errors.Is(err, tc.want) {
				t.Fatalf("the writer's fsync after closes it did not make: %v, want %v", err, tc.want)
			}
			if err := f.Sync(); err != nil {
				t.Fatalf("a failure is reported once to the writer's fsync; the next: %v", err)
			}
			undo()
		})
	}
}

// TestACloseReportsWhatItsFsyncWould: a close of a descriptor open for
// writing waits for its file's queued writes and reports their failure; the
// failure stays for the descriptor's fsync, and once the last close of the
// handle reported it, a descriptor opened later does not inherit it.
func TestACloseReportsWhatItsFsyncWould(t *testing.T) {
	c := startCluster(t, 1<<30)
	c.Config.RetryBudget = 3 * time.Second
	c.Config.AttemptTimeout = time.Second
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})

	t.Run("a write answered before its commit", func(t *testing.T) {
		path := filepath.Join(mnt, "written")
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		heal := c.loseQuorum(t)
		if _, err := f.WriteAt([]byte("no quorum"), 0); err != nil {
			t.Fatalf("the queued write must be answered before its commit, got %v", err)
		}
		closeElsewhere(t, f)
		if err := f.Close(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("the writer's close after a close it did not make: %v, want EIO", err)
		}
		heal()
		waitUntil(t, "writes to commit again once a quorum is back", func() bool {
			return os.WriteFile(filepath.Join(mnt, "probe"), []byte("x"), 0o644) == nil
		})
		g, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.WriteAt([]byte("quorum back"), 0); err != nil {
			t.Fatalf("a descriptor opened after the last close reported the failure must not inherit it: write: %v", err)
		}
		if err := g.Close(); err != nil {
			t.Fatalf("a descriptor opened after the last close reported the failure must not inherit it: close: %v", err)
		}
	})
}
