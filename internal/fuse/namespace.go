package fuse

// Names: create, mkdir, mknod, symlink, link, unlink, rmdir, rename,
// readdir, readlink. Each is one engine mutation, committed on a quorum
// before the kernel gets its answer.

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// hidden reports whether name is the mount's own orphan directory.
func (n *node) hidden(name string) bool {
	return n.ino() == client.RootIno && name == orphanDir
}

// writable refuses mutations on a read-only mount, of the hidden name and
// of a name longer than NAME_MAX.
func (n *node) writable(name string) syscall.Errno {
	if e := nameFits(name); e != 0 {
		return e
	}
	if n.fsys.opt.ReadOnly {
		return syscall.EROFS
	}
	if n.hidden(name) {
		return syscall.EPERM
	}
	return 0
}

// nameFits refuses a name longer than NAME_MAX (255 bytes, the engine's
// limit and what statfs reports) with ENAMETOOLONG: the kernel passes
// FUSE names up to 1024 bytes, and the engine's codec would answer EINVAL.
func nameFits(name string) syscall.Errno {
	if len(name) > wire.MaxName {
		return syscall.ENAMETOOLONG
	}
	return 0
}

// Create makes and opens a regular file.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := n.writable(name); e != 0 {
		return nil, nil, 0, e
	}
	uid, gid, m, e := n.newOwner(ctx, mode, false)
	if e != 0 {
		return nil, nil, 0, e
	}
	a, err := n.fsys.cl.Create(opCtx(), n.ino(), name, m, uid, gid)
	n.added(name, err)
	n.entryAdded(a, err)
	if err != nil {
		return nil, nil, 0, n.fsys.errno("create", n.ino(), err)
	}
	n.fsys.fillEntry(a, out)
	child := n.child(ctx, a)
	h, e := n.fsys.openHandle(child, flags)
	if e != 0 {
		return nil, nil, 0, e
	}
	return child, h, n.fsys.openFlags(), 0
}

// Tmpfile makes an open file with no name (O_TMPFILE).
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.fsys.opt.ReadOnly {
		return nil, nil, 0, syscall.EROFS
	}
	uid, gid, m, e := n.newOwner(ctx, mode, false)
	if e != 0 {
		return nil, nil, 0, e
	}
	a, err := n.fsys.orphans.tmpfile(m, uid, gid)
	if err != nil {
		return nil, nil, 0, n.fsys.errno("tmpfile", n.ino(), err)
	}
	n.fsys.fillEntry(a, out)
	c := &node{fsys: n.fsys}
	c.remember(a)
	in := n.NewInode(ctx, c, fs.StableAttr{Mode: syscall.S_IFREG, Ino: a.Ino})
	return in, n.fsys.newHandle(in, flags), n.fsys.openFlags(), 0
}

// Mkdir makes a directory.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.writable(name); e != 0 {
		return nil, e
	}
	uid, gid, m, e := n.newOwner(ctx, mode, true)
	if e != 0 {
		return nil, e
	}
	a, err := n.fsys.cl.Mkdir(opCtx(), n.ino(), name, m, uid, gid)
	n.added(name, err)
	n.entryAdded(a, err)
	if err != nil {
		return nil, n.fsys.errno("mkdir", n.ino(), err)
	}
	n.fsys.names.known(a.Ino, nil, n.fsys.names.since()) // made empty here
	n.fsys.fillEntry(a, out)
	return n.child(ctx, a), 0
}

// Mknod makes a FIFO, socket, device or regular file.
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.writable(name); e != 0 {
		return nil, e
	}
	uid, gid, m, e := n.newOwner(ctx, mode, false)
	if e != 0 {
		return nil, e
	}
	a, err := n.fsys.cl.Mknod(opCtx(), n.ino(), name, m, dev, uid, gid)
	n.added(name, err)
	n.entryAdded(a, err)
	if err != nil {
		return nil, n.fsys.errno("mknod", n.ino(), err)
	}
	n.fsys.fillEntry(a, out)
	return n.child(ctx, a), 0
}

// Symlink makes a symbolic link.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.writable(name); e != 0 {
		return nil, e
	}
	uid, gid, _, e := n.newOwner(ctx, 0o777, false)
	if e != 0 {
		return nil, e
	}
	a, err := n.fsys.cl.Symlink(opCtx(), n.ino(), name, target, uid, gid)
	n.added(name, err)
	n.entryAdded(a, err)
	if err != nil {
		return nil, n.fsys.errno("symlink", n.ino(), err)
	}
	n.fsys.fillEntry(a, out)
	return n.child(ctx, a), 0
}

// Link makes a hard link to target named name in this directory.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.writable(name); e != 0 {
		return nil, e
	}
	ino := target.EmbeddedInode().StableAttr().Ino
	n.fsys.settle(ino) // the answer carries its size
	a, err := n.fsys.cl.Link(opCtx(), ino, n.ino(), name)
	n.added(name, err)
	n.entryAdded(a, err)
	if err != nil {
		return nil, n.fsys.errno("link", ino, err)
	}
	n.fsys.fillEntry(a, out)
	return n.child(ctx, a), 0
}

// victim returns the inode number name refers to, when this mount knows it.
func (n *node) victim(name string) (uint64, bool) {
	c := n.GetChild(name)
	if c == nil {
		return 0, false
	}
	return c.StableAttr().Ino, true
}

// Unlink removes a name; a file this mount holds open lives on hidden.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if e := n.writable(name); e != 0 {
		return e
	}
	defer n.dirChanged()
	if ino, ok := n.victim(name); ok {
		// A last unlink frees the inode: its queued writes go first.
		n.fsys.settle(ino)
		kept, done, err := n.fsys.orphans.keep(ino, n.ino(), name, true)
		defer done()
		if err != nil || kept {
			n.removed(name, err)
			return n.fsys.errno("unlink", n.ino(), err)
		}
	}
	err := n.fsys.cl.Unlink(opCtx(), n.ino(), name)
	n.removed(name, err)
	return n.fsys.errno("unlink", n.ino(), err)
}

// Rmdir removes an empty directory.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if e := n.writable(name); e != 0 {
		return e
	}
	defer n.dirChanged()
	err := n.fsys.cl.Rmdir(opCtx(), n.ino(), name)
	n.removed(name, err)
	return n.fsys.errno("rmdir", n.ino(), err)
}

// Rename moves name to newParent/newName (flags: 0, RENAME_NOREPLACE or
// RENAME_EXCHANGE). A replaced file this mount holds open lives on hidden.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	dst, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if e := n.writable(name); e != 0 {
		return e
	}
	if e := dst.writable(newName); e != 0 {
		return e
	}
	if flags == 0 {
		if ino, ok := dst.victim(newName); ok {
			src, _ := n.victim(name)
			if src != ino {
				_, done, err := n.fsys.orphans.keep(ino, dst.ino(), newName, false)
				defer done()
				if err != nil {
					return n.fsys.errno("rename", n.ino(), err)
				}
			}
		}
	}
	defer n.dirChanged()
	defer dst.dirChanged()
	// The moved entry and the one at the target (exchanged or replaced)
	// change too: their ctime, and a directory's "..".
	for _, c := range []*fs.Inode{n.GetChild(name), dst.GetChild(newName)} {
		if c == nil {
			continue
		}
		if moved, ok := c.Operations().(*node); ok {
			defer moved.dirChanged()
		}
	}
	err := n.fsys.cl.Rename(opCtx(), n.ino(), name, dst.ino(), newName, flags)
	if flags&client.RenameExchange == 0 {
		// Both names exist after an exchange; otherwise the name moved.
		n.removed(name, err)
		dst.added(newName, err)
	}
	return n.fsys.errno("rename", n.ino(), err)
}

// Readdir lists the directory (without "." and "..", which go-fuse adds).
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	epoch := n.fsys.names.since()
	var list []fuse.DirEntry
	const page = 1024
	for off := uint64(0); ; {
		ents, err := n.fsys.cl.Readdir(opCtx(), n.ino(), off, page)
		if err != nil {
			return nil, n.fsys.errno("readdir", n.ino(), err)
		}
		for _, e := range ents {
			if n.hidden(e.Name) {
				continue
			}
			list = append(list, fuse.DirEntry{Name: e.Name, Ino: e.Ino, Mode: e.Mode})
		}
		if len(ents) < page {
			n.fsys.names.known(n.ino(), entryNames(list), epoch)
			return fs.NewListDirStream(list), 0
		}
		off += uint64(len(ents))
	}
}

// Readlink returns a symbolic link's target.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	t, err := n.fsys.cl.Readlink(opCtx(), n.ino())
	if err != nil {
		return nil, n.fsys.errno("readlink", n.ino(), err)
	}
	return []byte(t), 0
}

// added and removed keep the directory name cache (names.go) in step with
// a change of name in n whose engine answer was err.
func (n *node) added(name string, err error) {
	n.fsys.names.settled(n.ino(), err, func() { n.fsys.names.added(n.ino(), name) })
}

func (n *node) removed(name string, err error) {
	n.fsys.names.settled(n.ino(), err, func() { n.fsys.names.removed(n.ino(), name) })
}

func entryNames(list []fuse.DirEntry) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.Name
	}
	return out
}
