package fuse

// Users and permissions. The mount serves every user (allow_other) and the
// kernel enforces POSIX permissions itself (the default_permissions mount
// option): mode bits on every path walk, open and create, the sticky
// directory rule on unlink, rmdir and rename, and setattr_prepare's rules for
// chmod, chown, chgrp and utimens (owner or CAP_FOWNER/CAP_CHOWN, EPERM or
// EACCES as POSIX says), setgid stripping on chmod and on create in a setgid
// directory, and suid/sgid clearing on write and chown. The engine checks no
// permission. What remains for the filesystem is the ownership of a new
// node, which FUSE leaves to it: the caller's UID and GID, except that a
// setgid directory passes on its group, and to a new directory its setgid
// bit too. The kernel has already applied the caller's umask.

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// newOwner returns the owner, group and mode of a node the caller creates in
// directory n.
func (n *node) newOwner(ctx context.Context, mode uint32, isDir bool) (uid, gid, m uint32, errno syscall.Errno) {
	if caller, ok := fuse.FromContext(ctx); ok {
		uid, gid = caller.Uid, caller.Gid
	}
	dir, errno := n.dirAttr()
	if errno != 0 {
		return 0, 0, 0, errno
	}
	m = mode
	if dir.Mode&syscall.S_ISGID != 0 {
		gid = dir.GID
		if isDir {
			m |= syscall.S_ISGID
		}
	}
	return uid, gid, m, 0
}

// dirAttr returns n's attributes, from the cache on single-writer volumes.
func (n *node) dirAttr() (client.Attr, syscall.Errno) {
	if a, ok := n.cached(); ok {
		return a, 0
	}
	a, err := n.fsys.cl.GetAttr(opCtx(), n.ino())
	if err != nil {
		return a, n.fsys.errno("getattr", n.ino(), err)
	}
	n.remember(a)
	return a, 0
}
