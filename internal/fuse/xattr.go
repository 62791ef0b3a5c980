package fuse

// Extended attributes, stored by the engine per inode. A value that does not
// fit the caller's buffer answers ERANGE with the size needed, as getxattr(2)
// and listxattr(2) expect.

import (
	"context"
	"syscall"
)

// Getxattr returns a value (ENODATA when absent).
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	v, err := n.fsys.cl.GetXattr(opCtx(), n.ino(), attr)
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
	return n.fsys.errno("removexattr", n.ino(), n.fsys.cl.RemoveXattr(opCtx(), n.ino(), attr))
}
