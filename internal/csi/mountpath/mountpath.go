// Package mountpath resolves the target and staging paths kubelet (or the
// replica host) hands the CSI node plugin, refusing anything outside the
// configured roots and any symlink beneath them, and performs bind mounts
// onto the resolved directory so a path swapped after the check cannot
// redirect a mount. It also reads the mount table (/proc/self/mountinfo).
//
// Path resolution is done by the kernel: openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS from a descriptor of the root, so "..", absolute
// symlinks and symlinked parents are refused atomically rather than by
// string checks alone.
//
// It must never import a driver package or gRPC: drivers map its errors to
// CSI codes.
package mountpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrOutsideRoots: the path is not absolute, not clean, or not beneath any
// allowed root.
var ErrOutsideRoots = errors.New("path is not a clean absolute path beneath an allowed root")

// ErrSymlink: a component of the path beneath the root is a symlink.
var ErrSymlink = errors.New("path crosses a symlink")

// ErrNotDir: the path names something other than a directory (a file, or a
// symlink as its final component).
var ErrNotDir = errors.New("path is not a directory")

// Roots are the directories target and staging paths must lie beneath.
// Each root is trusted as configured (it may itself be reached through a
// symlink); everything beneath it is not.
type Roots []string

// NewRoots validates and cleans the configured roots.
func NewRoots(roots ...string) (Roots, error) {
	out := make(Roots, 0, len(roots))
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("allowed root %q: must be absolute", r)
		}
		out = append(out, filepath.Clean(r))
	}
	if len(out) == 0 {
		return nil, errors.New("no allowed root configured")
	}
	return out, nil
}

// Locate checks p lexically and returns the root it lies beneath and its
// path relative to that root. The root itself is not a valid target.
func (rs Roots) Locate(p string) (root, rel string, err error) {
	if p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0) {
		return "", "", fmt.Errorf("%q: %w", p, ErrOutsideRoots)
	}
	for _, r := range rs {
		rel, err := filepath.Rel(r, p)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		return r, rel, nil
	}
	return "", "", fmt.Errorf("%q (roots %v): %w", p, []string(rs), ErrOutsideRoots)
}

// Within reports whether p lies beneath the single root r (lexically).
func Within(r, p string) bool {
	rel, err := filepath.Rel(r, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../")
}

// open resolves rel beneath root with the kernel refusing symlinks and
// escapes; flags are added to O_CLOEXEC.
func open(root, rel string, flags uint64) (*os.File, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open root %s: %w", root, err)
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
		Flags:   flags | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
			return nil, fmt.Errorf("%s: %w", filepath.Join(root, rel), ErrSymlink)
		}
		if errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s: %w", filepath.Join(root, rel), ErrNotDir)
		}
		return nil, &os.PathError{Op: "openat2", Path: filepath.Join(root, rel), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, rel)), nil
}

// OpenDir resolves p (beneath the roots, no symlinks) to an O_PATH
// descriptor of a directory. With create, a missing final component is
// created (its parent must already exist, as CSI requires of kubelet).
func (rs Roots) OpenDir(p string, create bool) (*os.File, error) {
	root, rel, err := rs.Locate(p)
	if err != nil {
		return nil, err
	}
	f, err := open(root, rel, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err == nil || !create || !errors.Is(err, os.ErrNotExist) {
		return f, err
	}
	parent, err := open(root, filepath.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("parent of %s: %w", p, err)
	}
	defer parent.Close()
	if err := unix.Mkdirat(int(parent.Fd()), filepath.Base(rel), 0o750); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("create %s: %w", p, err)
	}
	return open(root, rel, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
}

// Check resolves p like OpenDir without creating anything and closes it:
// it proves p is a real directory beneath a root right now.
func (rs Roots) Check(p string) error {
	f, err := rs.OpenDir(p, false)
	if err != nil {
		return err
	}
	return f.Close()
}

// BindMount bind-mounts source onto the directory target refers to,
// read-only when asked. It uses the new mount API: the bind is cloned
// detached (open_tree), made read-only before it is attached
// (mount_setattr), and attached onto the already resolved target
// descriptor (move_mount), so a read-only publication is never visible
// writable and a path swapped after resolution cannot redirect it. A final
// symlink at source is refused.
func BindMount(source string, target *os.File, readOnly bool) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, source,
		unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return fmt.Errorf("clone mount of %s: %w", source, err)
	}
	defer unix.Close(fd)
	if readOnly {
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
			return fmt.Errorf("make bind of %s read-only: %w", source, err)
		}
	}
	err = unix.MoveMount(fd, "", int(target.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", source, target.Name(), err)
	}
	return nil
}

// Unmount unmounts the mount at p (a path already checked by Locate),
// never following a final symlink. detach also detaches a mount whose FUSE
// owner died (ENOTCONN), which a plain unmount may refuse while busy.
func Unmount(p string, detach bool) error {
	flags := unix.UMOUNT_NOFOLLOW
	if detach {
		flags |= unix.MNT_DETACH
	}
	if err := unix.Unmount(p, flags); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", p, err)
	}
	return nil
}
