package fuse

// Extended attributes, stored by the engine per inode. A value that does not
// fit the caller's buffer answers ERANGE with the size needed, as getxattr(2)
// and listxattr(2) expect.
//
// The kernel asks for "security.capability" before every write (to drop
// file capabilities, as write(2) must), which would cost each WRITE a
// coordinator round trip. On a single-writer volume the mount remembers the
// names it found absent on a node and answers those itself until it sets
// one; any change with an uncertain outcome forgets them.

import (
	"context"
	"errors"
	"syscall"
)

// Getxattr returns a value (ENODATA when absent).
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if n.xattrAbsent(attr) {
		return 0, syscall.ENODATA
	}
	v, err := n.fsys.cl.GetXattr(opCtx(), n.ino(), attr)
	if errors.Is(err, syscall.ENODATA) {
		n.xattrSettled(attr, true)
	}
	if err != nil {
		return 0, n.fsys.errno("getxattr", n.ino(), err)
	}
	if len(v) > len(dest) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// Setxattr sets a value (flags: XATTR_CREATE, XATTR_REPLACE).
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if n.fsys.opt.ReadOnly {
		return syscall.EROFS
	}
	defer n.dirChanged() // ctime
	// Forgotten before the change: a concurrent lookup must not answer
	// absent once the value may exist.
	n.xattrSettled(attr, false)
	return n.fsys.errno("setxattr", n.ino(), n.fsys.cl.SetXattr(opCtx(), n.ino(), attr, data, flags))
}

// Listxattr lists names, each followed by a NUL byte.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	names, err := n.fsys.cl.ListXattr(opCtx(), n.ino())
	if err != nil {
		return 0, n.fsys.errno("listxattr", n.ino(), err)
	}
	var b []byte
	for _, name := range names {
		b = append(append(b, name...), 0)
	}
	if len(b) > len(dest) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

// Removexattr removes a value (ENODATA when absent).
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.fsys.opt.ReadOnly {
		return syscall.EROFS
	}
	defer n.dirChanged() // ctime
	err := n.fsys.cl.RemoveXattr(opCtx(), n.ino(), attr)
	if err == nil || errors.Is(err, syscall.ENODATA) {
		n.xattrSettled(attr, true)
	}
	return n.fsys.errno("removexattr", n.ino(), err)
}

// maxAbsentXattrs bounds the names remembered per node.
const maxAbsentXattrs = 16

// xattrAbsent reports whether attr is known absent on n.
func (n *node) xattrAbsent(attr string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.noXattr[attr]
	return ok
}

// xattrSettled records attr as absent on n, or forgets that it was.
func (n *node) xattrSettled(attr string, absent bool) {
	if !n.fsys.opt.SingleWriter || n.fsys.opt.ReadOnly {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case !absent:
		delete(n.noXattr, attr)
	case n.noXattr == nil:
		n.noXattr = map[string]struct{}{attr: {}}
	case len(n.noXattr) < maxAbsentXattrs:
		n.noXattr[attr] = struct{}{}
	}
}
