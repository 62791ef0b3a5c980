package fuse_test

// Permission semantics as non-root users. Each operation runs in a child
// process (this test binary re-executed) whose UID, GID and groups are
// switched through syscall.Credential, so the kernel sees a real unprivileged
// caller, exactly as a Pod's process.

import (
	"encoding/json"
	"errors"
	"fmt"
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

const childEnv = "CELLFLEET_FUSE_TEST_CHILD"

// childOp is one operation a child performs.
type childOp struct {
	Op   string `json:"op"` // create, open-read, open-write, unlink, rename, chmod, chown, utimes, utimes-now, mkdir
	Path string `json:"path"`
	To   string `json:"to,omitempty"`
	Mode uint32 `json:"mode,omitempty"`
	UID  int    `json:"uid,omitempty"`
	GID  int    `json:"gid,omitempty"`
}

// runChild performs the operation in $CELLFLEET_FUSE_TEST_CHILD and prints
// "OK" or the errno's name.
func runChild() int {
	var op childOp
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &op); err != nil {
		fmt.Println("BADSPEC")
		return 2
	}
	unix.Umask(0o022)
	var err error
	switch op.Op {
	case "create":
		var fd int
		fd, err = unix.Open(op.Path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, op.Mode)
		if err == nil {
			unix.Close(fd)
		}
	case "mkdir":
		err = unix.Mkdir(op.Path, op.Mode)
	case "open-read", "open-write":
		flags := unix.O_RDONLY
		if op.Op == "open-write" {
			flags = unix.O_WRONLY
		}
		var fd int
		fd, err = unix.Open(op.Path, flags, 0)
		if err == nil {
			unix.Close(fd)
		}
	case "unlink":
		err = unix.Unlink(op.Path)
	case "rename":
		err = unix.Rename(op.Path, op.To)
	case "chmod":
		err = unix.Chmod(op.Path, op.Mode)
	case "chown":
		err = unix.Chown(op.Path, op.UID, op.GID)
	case "utimes":
		ts := []unix.Timespec{unix.NsecToTimespec(1e9), unix.NsecToTimespec(2e9)}
		err = unix.UtimesNanoAt(unix.AT_FDCWD, op.Path, ts, 0)
	case "utimes-now":
		err = unix.UtimesNanoAt(unix.AT_FDCWD, op.Path, nil, 0)
	case "flock-hold", "posix-hold":
		// Take an exclusive lock, say so, and hold it until stdin closes.
		var fd int
		fd, err = unix.Open(op.Path, unix.O_RDWR, 0)
		if err == nil {
			if op.Op == "flock-hold" {
				err = unix.Flock(fd, unix.LOCK_EX)
			} else {
				err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &unix.Flock_t{Type: unix.F_WRLCK})
			}
		}
		if err == nil {
			fmt.Println("LOCKED")
			_, _ = os.Stdin.Read(make([]byte, 1))
			return 0
		}
	default:
		fmt.Println("BADOP")
		return 2
	}
	var en syscall.Errno
	switch {
	case err == nil:
		fmt.Println("OK")
	case errors.As(err, &en):
		fmt.Println(unix.ErrnoName(en))
	default:
		fmt.Println(err)
	}
	return 0
}

// user is a caller identity.
type user struct {
	name     string
	uid, gid uint32
	groups   []uint32
}

var (
	root  = user{"root", 0, 0, nil}
	alice = user{"alice", 1001, 1001, nil}
	bob   = user{"bob", 1002, 1002, []uint32{3000}}
)

// as runs op as u and returns "OK" or the errno name.
func as(t *testing.T, u user, op childOp) string {
	t.Helper()
	spec, _ := json.Marshal(op)
	cmd := exec.Command(childBin, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s as %s: %v", op.Op, u.name, err)
	}
	return strings.TrimSpace(string(out))
}

func mustAs(t *testing.T, u user, op childOp) {
	t.Helper()
	if got := as(t, u, op); got != "OK" {
		t.Fatalf("setup: %s %s as %s: %s", op.Op, op.Path, u.name, got)
	}
}

func statOf(t *testing.T, p string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatalf("stat %s: %v", p, err)
	}
	return st
}

// TestPermissionsAsUnprivilegedUsers proves the POSIX answers for create,
// open, unlink, rename, chmod, chown and utimens, each allowed and denied.
func TestPermissionsAsUnprivilegedUsers(t *testing.T) {
	c := startCluster(t, 1<<30)
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	p := func(parts ...string) string { return filepath.Join(append([]string{mnt}, parts...)...) }

	// Layout, made by root: a sticky world-writable directory, alice's
	// private directory, and a setgid directory of group 3000.
	for _, d := range []struct {
		name string
		mode uint32
		uid  int
		gid  int
	}{{"sticky", 0o1777, 0, 0}, {"private", 0o700, 1001, 1001}, {"sgid", 0o2777, 0, 3000}, {"open", 0o777, 0, 0}} {
		if err := os.Mkdir(p(d.name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p(d.name), d.uid, d.gid); err != nil {
			t.Fatal(err)
		}
		if err := unix.Chmod(p(d.name), d.mode); err != nil {
			t.Fatal(err)
		}
	}
	mustAs(t, alice, childOp{Op: "create", Path: p("sticky", "alice-file"), Mode: 0o666})
	mustAs(t, alice, childOp{Op: "create", Path: p("open", "alice-file"), Mode: 0o644})
	mustAs(t, alice, childOp{Op: "create", Path: p("open", "alice-shared"), Mode: 0o666})
	mustAs(t, alice, childOp{Op: "chmod", Path: p("open", "alice-shared"), Mode: 0o666})

	t.Run("create owner and umask", func(t *testing.T) {
		st := statOf(t, p("sticky", "alice-file"))
		if st.Uid != 1001 || st.Gid != 1001 || st.Mode&0o7777 != 0o644 {
			t.Fatalf("a file alice creates with mode 0666 under umask 022 must be 1001:1001 0644, is %d:%d %#o", st.Uid, st.Gid, st.Mode&0o7777)
		}
	})
	t.Run("setgid directory passes its group on", func(t *testing.T) {
		mustAs(t, alice, childOp{Op: "create", Path: p("sgid", "f"), Mode: 0o644})
		mustAs(t, alice, childOp{Op: "mkdir", Path: p("sgid", "d"), Mode: 0o755})
		if st := statOf(t, p("sgid", "f")); st.Gid != 3000 {
			t.Fatalf("a file created in a setgid directory must take its group 3000, has %d", st.Gid)
		}
		if st := statOf(t, p("sgid", "d")); st.Gid != 3000 || st.Mode&syscall.S_ISGID == 0 {
			t.Fatalf("a directory created in a setgid directory must take its group and setgid bit, has gid %d mode %#o", st.Gid, st.Mode)
		}
	})

	cases := []struct {
		name string
		who  user
		op   childOp
		want string
	}{
		{"create in own private directory", alice, childOp{Op: "create", Path: p("private", "x"), Mode: 0o644}, "OK"},
		{"create in another user's private directory", bob, childOp{Op: "create", Path: p("private", "y"), Mode: 0o644}, "EACCES"},
		{"open another user's 0644 file for reading", bob, childOp{Op: "open-read", Path: p("open", "alice-file")}, "OK"},
		{"open another user's 0644 file for writing", bob, childOp{Op: "open-write", Path: p("open", "alice-file")}, "EACCES"},
		{"open through a directory without search permission", bob, childOp{Op: "open-read", Path: p("private", "x")}, "EACCES"},
		{"unlink another user's file in a sticky directory", bob, childOp{Op: "unlink", Path: p("sticky", "alice-file")}, "EPERM"},
		{"rename another user's file in a sticky directory", bob, childOp{Op: "rename", Path: p("sticky", "alice-file"), To: p("sticky", "stolen")}, "EPERM"},
		{"chmod another user's file", bob, childOp{Op: "chmod", Path: p("open", "alice-file"), Mode: 0o666}, "EPERM"},
		{"chmod own file", alice, childOp{Op: "chmod", Path: p("open", "alice-file"), Mode: 0o640}, "OK"},
		{"chown own file to another user", alice, childOp{Op: "chown", Path: p("open", "alice-file"), UID: 1002, GID: -1}, "EPERM"},
		{"chgrp own file to a group the owner is not in", alice, childOp{Op: "chown", Path: p("open", "alice-file"), UID: -1, GID: 3000}, "EPERM"},
		{"chown as root", root, childOp{Op: "chown", Path: p("open", "alice-shared"), UID: 1002, GID: 1002}, "OK"},
		{"chgrp own file to a supplementary group", bob, childOp{Op: "chown", Path: p("open", "alice-shared"), UID: -1, GID: 3000}, "OK"},
		{"set explicit times on another user's file", alice, childOp{Op: "utimes", Path: p("open", "alice-shared")}, "EPERM"},
		{"set times to now on a file one may write", alice, childOp{Op: "utimes-now", Path: p("open", "alice-shared")}, "OK"},
		{"set times to now on a file one may not write", bob, childOp{Op: "utimes-now", Path: p("open", "alice-file")}, "EACCES"},
		{"set explicit times on own file", bob, childOp{Op: "utimes", Path: p("open", "alice-shared")}, "OK"},
		{"unlink own file in a sticky directory", alice, childOp{Op: "unlink", Path: p("sticky", "alice-file")}, "OK"},
		{"unlink in a directory one may write", bob, childOp{Op: "unlink", Path: p("open", "alice-file")}, "OK"},
		{"rename own file", alice, childOp{Op: "rename", Path: p("private", "x"), To: p("private", "x2")}, "OK"},
	}
	// The cases run in order: later ones depend on earlier chmod/chown.
	for _, tc := range cases {
		if got := as(t, tc.who, tc.op); got != tc.want {
			t.Errorf("%s (%s as %s): got %s, POSIX says %s", tc.name, tc.op.Op, tc.who.name, got, tc.want)
		}
	}
	if st := statOf(t, p("open", "alice-shared")); st.Mtim.Sec != 2 {
		t.Errorf("bob's explicit utimens on his own file must set mtime to 2s, mtime is %v", time.Unix(st.Mtim.Unix()))
	}
}
