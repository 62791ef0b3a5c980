package powercut

import (
	"context"
	"log/slog"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is go-fuse's loopback node with every durability-relevant operation
// reported to the model: data writes and truncations mark pages, namespace
// changes mark their directories, fsync copies the current state into the
// durable image. The operation itself always goes through to the backing
// directory first, and is recorded only once it happened, so a sync that
// races it either copies it or leaves it marked. Each of them first passes
// the freeze gate (freeze.go).
type node struct {
	*fs.LoopbackNode
	p *FS
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
)

func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), p: n.p}
}

// backing is the node's path in the backing directory.
func (n *node) backing() string { return filepath.Join(n.p.backing, n.Path(nil)) }

// changed records that a directory's entries differ from its durable ones.
func (n *node) changed() {
	var st unix.Stat_t
	if err := unix.Lstat(n.backing(), &st); err != nil {
		slog.Warn("powercut: directory vanished while recording a change", "dir", n.backing(), "err", err)
		return
	}
	n.p.mu.Lock()
	defer n.p.mu.Unlock()
	if r, err := n.p.m.live(st.Ino, st.Mode); err == nil {
		r.renamed = true
	}
}

// born records the inode just made at name as fresh: nothing of it is
// durable, and its number, if reused, no longer means the old inode.
func (n *node) born(name string) syscall.Errno {
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(n.backing(), name), &st); err != nil {
		return fs.ToErrno(err)
	}
	n.p.mu.Lock()
	_, err := n.p.m.fresh(st.Ino, st.Mode)
	n.p.mu.Unlock()
	if err != nil {
		return syscall.EIO
	}
	n.changed()
	return 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.p.pass()
	var before unix.Stat_t
	existed := unix.Lstat(filepath.Join(n.backing(), name), &before) == nil
	ch, fh, fflags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if !existed {
		if errno := n.born(name); errno != 0 {
			return nil, nil, 0, errno
		}
	}
	f, errno := n.p.wrap(fh, filepath.Join(n.backing(), name), flags, before.Size)
	return ch, f, fflags, errno
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	var before unix.Stat_t
	if flags&syscall.O_TRUNC != 0 {
		n.p.pass()
		if err := unix.Lstat(n.backing(), &before); err != nil {
			return nil, 0, fs.ToErrno(err)
		}
	}
	fh, fflags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	f, errno := n.p.wrap(fh, n.backing(), flags, before.Size)
	return f, fflags, errno
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.p.pass()
	ch, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		errno = n.born(name)
	}
	return ch, errno
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.p.pass()
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, syscall.ENOTSUP // devices, fifos and sockets are not modelled
	}
	ch, errno := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	if errno == 0 {
		errno = n.born(name)
	}
	return ch, errno
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.p.pass()
	ch, errno := n.LoopbackNode.Symlink(ctx, target, name, out)
	if errno == 0 {
		errno = n.born(name)
	}
	return ch, errno
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.p.pass()
	ch, errno := n.LoopbackNode.Link(ctx, target, name, out)
	if errno == 0 {
		n.changed()
	}
	return ch, errno
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.p.pass()
	errno := n.LoopbackNode.Unlink(ctx, name)
	if errno == 0 {
		n.changed()
	}
	return errno
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.p.pass()
	errno := n.LoopbackNode.Rmdir(ctx, name)
	if errno == 0 {
		n.changed()
	}
	return errno
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	n.p.pass()
	errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if errno == 0 {
		n.changed()
		if np, ok := newParent.(*node); ok {
			np.changed()
		}
	}
	return errno
}

// Tmpfile refuses O_TMPFILE: linkat of an anonymous inode is not modelled.
func (n *node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.ENOTSUP
}

// CopyFileRange answers ENOSYS so the kernel copies through READ and WRITE,
// which the model sees.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut, length, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.p.pass()
	fh, _ := f.(*file)
	var inner fs.FileHandle
	if fh != nil {
		inner = fh.lf
	}
	size, resize := in.GetSize()
	var before unix.Stat_t
	if resize {
		if err := unix.Lstat(n.backing(), &before); err != nil {
			return fs.ToErrno(err)
		}
	}
	if errno := n.LoopbackNode.Setattr(ctx, inner, in, out); errno != 0 || !resize {
		return errno
	}
	n.p.mu.Lock()
	defer n.p.mu.Unlock()
	r, err := n.p.m.live(before.Ino, before.Mode)
	if err != nil {
		return syscall.EIO
	}
	r.markPages(min(before.Size, int64(size)), max(before.Size, int64(size)))
	return 0
}

// Fsync makes a file's data, or a directory's entries, durable. fdatasync
// and fsync are the same here: attributes other than the size are not
// modelled.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	n.p.pass()
	if n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return n.p.syncDir(n.backing())
	}
	if fh, ok := f.(*file); ok {
		return n.p.syncFile(fh)
	}
	return syscall.EBADF
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ds, errno := fs.NewLoopbackDirStream(n.backing())
	if errno != 0 {
		return nil, 0, errno
	}
	return &dir{DirStream: ds, n: n}, 0, 0
}
