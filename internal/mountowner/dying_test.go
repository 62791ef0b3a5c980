package mountowner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/mountowner/api"
)

// stuckOwnerEnv makes the test binary act as an owner left dying by a
// stuck thread (serveStuckOwner): its value is the lock file, the mount
// directory and "main" or "other" (the thread that gets stuck), one per
// line.
const stuckOwnerEnv = "MOUNTOWNER_TEST_STUCK_OWNER"

// The child's side runs before TestMain (an init of the internal test
// package, which the external one's TestMain cannot see).
func init() {
	if spec := os.Getenv(stuckOwnerEnv); spec != "" {
		f := strings.Split(spec, "\n")
		if len(f) != 3 {
			os.Exit(2)
		}
		os.Exit(serveStuckOwner(f[0], f[1], f[2] == "main"))
	}
}

// stuckFile's attributes are never answered: a request for them stays in
// its handler.
type stuckFile struct {
	fs.Inode
	entered chan struct{}
}

func (s *stuckFile) Getattr(context.Context, fs.FileHandle, *fuse.AttrOut) syscall.Errno {
	close(s.entered)
	select {}
}

// serveStuckOwner takes the owner lock, mounts a filesystem whose file
// "stuck" never answers, and stats that file from a thread of its own, so
// the request waits in the kernel for this same process. Once the server
// has read it, a kill leaves that thread waiting uninterruptibly for an
// answer no one will give: the process never finishes exiting, and its
// lock and FUSE connection stay open (what the nemesis found of an owner
// stuck in a cache invalidation, docs/qualification.md).
func serveStuckOwner(lockPath, dir string, onMain bool) int {
	runtime.LockOSThread() // this goroutine keeps the main thread
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	file := &stuckFile{entered: make(chan struct{})}
	root := &fs.Inode{}
	opts := &fs.Options{MountOptions: fuse.MountOptions{DirectMount: true}, OnAdd: func(context.Context) {
		root.AddChild("stuck", root.NewPersistentInode(context.Background(), file, fs.StableAttr{Mode: syscall.S_IFREG}), false)
	}}
	if _, err := fs.Mount(dir, root, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stuck := func() {
		var st unix.Stat_t
		_ = unix.Stat(filepath.Join(dir, "stuck"), &st)
	}
	if onMain {
		go func() {
			<-file.entered
			os.Stdout.WriteString("STUCK\n")
		}()
		stuck()
	}
	go stuck()
	<-file.entered
	os.Stdout.WriteString("STUCK\n")
	select {}
}

// TestAnOwnerLeftDyingByAStuckThreadIsTakenOver: a killed owner whose
// thread waits in the kernel on its own mount holds the owner lock for
// ever, and a new owner refused to start ("another mount owner holds").
// takeLock sees the holder dying, aborts the connections its records name,
// and gets the lock once the process has ended. The stuck thread may be
// the main one (the nemesis found it so: the process then shows
// uninterruptible with SIGKILL pending, not as a zombie) or another.
func TestAnOwnerLeftDyingByAStuckThreadIsTakenOver(t *testing.T) {
	for _, thread := range []string{"other", "main"} {
		t.Run(thread+" thread stuck", func(t *testing.T) { takeOverFromDyingOwner(t, thread) })
	}
}

func takeOverFromDyingOwner(t *testing.T, thread string) {
	state, target := t.TempDir(), t.TempDir()
	lockPath := filepath.Join(state, "owner.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), stuckOwnerEnv+"="+lockPath+"\n"+target+"\n"+thread)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		// Whatever the outcome, the child must not stay stuck.
		_, _ = abortConnection(target)
		_ = unix.Unmount(target, unix.MNT_DETACH)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})
	line := make([]byte, len("STUCK\n"))
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "STUCK\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("the stuck owner child did not get stuck: %q %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(exited) }()
	select {
	case <-exited:
		t.Fatal("the killed owner exited: no thread was stuck, the fault was not injected")
	case <-time.After(2 * time.Second):
	}

	recs := records{dir: filepath.Join(state, "sessions")}
	if err := os.MkdirAll(recs.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := recs.write(api.Session{VolumeID: "rv-1", Target: target, State: api.StateMounted}); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(lockPath, os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	start := time.Now()
	if err := takeLock(lock, recs, slog.Default()); err != nil {
		t.Fatalf("a new owner could not take the lock of one left dying by a stuck thread: %v", err)
	}
	t.Logf("lock taken %v after the dying owner was found", time.Since(start).Round(time.Millisecond))
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the lock was taken but the dying owner never ended")
	}
}
