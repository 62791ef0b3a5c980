package mountowner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// HungServerEnv makes the test binary (TestMain, in the external test
// package) serve an empty FUSE filesystem at the directory it names until
// killed, with ServeHungMount.
const HungServerEnv = "MOUNTOWNER_TEST_SERVE_FUSE"

// ServeHungMount is the child's side: mount, say so, serve.
func ServeHungMount(dir string) int {
	srv, err := fs.Mount(dir, &fs.Inode{}, &fs.Options{MountOptions: fuse.MountOptions{DirectMount: true}})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	os.Stdout.WriteString("MOUNTED\n")
	srv.Wait()
	return 0
}

// TestAConnectionWhoseServerHangsIsAborted: a FUSE mount whose server is
// alive but answers nothing (here stopped with SIGSTOP; in the nemesis a
// killed owner whose thread was stuck in a cache invalidation, so the
// process never finished exiting) hangs every request, statfs included, so
// a new owner probing it hung too. abortConnection ends the connection: the
// mount then answers ENOTCONN at once and is unmounted like any stale one.
func TestAConnectionWhoseServerHangsIsAborted(t *testing.T) {
	target := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), HungServerEnv+"="+target)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = unix.Unmount(target, unix.MNT_DETACH)
	})
	line := make([]byte, len("MOUNTED\n"))
	if _, err := out.Read(line); err != nil || string(line) != "MOUNTED\n" {
		t.Fatalf("the FUSE server child did not mount: %q %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A stop is delivered thread by thread: until every thread of the
	// server has stopped, one of them may still answer the statfs below.
	waitStopped(t, cmd.Process.Pid)

	hung := make(chan error, 1)
	go func() {
		var sfs unix.Statfs_t
		hung <- unix.Statfs(target, &sfs)
	}()
	select {
	case err := <-hung:
		t.Fatalf("statfs of a mount whose server is stopped returned (%v): the fault was not injected", err)
	case <-time.After(2 * time.Second):
	}

	aborted, err := abortConnection(target)
	if err != nil || !aborted {
		t.Fatalf("abortConnection(%s) = %v, %v; want the connection aborted", target, aborted, err)
	}
	select {
	case err := <-hung:
		// The kernel answers a request in flight ECONNABORTED, later ones
		// ENOTCONN.
		if !errors.Is(err, syscall.ECONNABORTED) && !errors.Is(err, syscall.ENOTCONN) {
			t.Fatalf("the statfs waiting on the hung server answered %v, want ECONNABORTED", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the statfs waiting on the hung server still hangs after the abort")
	}
	if state, err := probe(target); state != targetStale {
		t.Fatalf("probe after the abort: %v (%v), want a stale mount", state, err)
	}
	if err := detach(target); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := fuseMinor(filepath.Clean(target)); ok || err != nil {
		t.Fatalf("the target is still a FUSE mount point after the abort and unmount (%v)", err)
	}
	if aborted, err := abortConnection(target); aborted || err != nil {
		t.Fatalf("abortConnection of a directory that is no mount point = %v, %v; want nothing done", aborted, err)
	}
}

// waitStopped waits until every thread of process pid is stopped.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, err := os.ReadFile(task)
			// The state follows the command name in parentheses.
			if i := bytes.LastIndexByte(b, ')'); err != nil || i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not stop within 10s of SIGSTOP", pid)
		}
		time.Sleep(10 * time.Millisecond) // polling interval of a deadline-bounded wait
	}
}
