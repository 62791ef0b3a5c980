package fuse

// Inodes: lookup, attributes and statfs. The kernel keys everything by the
// engine's inode numbers (stable, never reused), so a hard link found under
// two names is one go-fuse Inode.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// filesystem is one mounted volume.
type filesystem struct {
	cl      *client.Client
	opt     Options
	log     *slog.Logger
	batch   *batcher
	wb      *writeback // nil: writes are synchronous
	names   *names     // nil: every lookup asks the coordinator
	orphans *orphans
}

// settle waits for ino's queued writes (write-behind), so an answer about
// ino reflects every write the mount acknowledged.
func (f *filesystem) settle(ino uint64) {
	if f.wb != nil {
		f.wb.drain(ino)
	}
}

// node is one inode of the volume.
type node struct {
	fs.Inode
	fsys *filesystem

	mu   sync.Mutex
	attr client.Attr // last attributes seen (directories: for setgid inheritance)
	seen bool
	// exact: attr is the engine's current state, kept so by deriving each
	// change this mount made (dirattr.go); directories only.
	exact bool
	// noXattr holds extended attribute names known absent (xattr.go).
	noXattr map[string]struct{}
}

var (
	_ fs.NodeLookuper      = (*node)(nil)
	_ fs.NodeGetattrer     = (*node)(nil)
	_ fs.NodeSetattrer     = (*node)(nil)
	_ fs.NodeStatfser      = (*node)(nil)
	_ fs.NodeCreater       = (*node)(nil)
	_ fs.NodeTmpfiler      = (*node)(nil)
	_ fs.NodeMkdirer       = (*node)(nil)
	_ fs.NodeMknoder       = (*node)(nil)
	_ fs.NodeSymlinker     = (*node)(nil)
	_ fs.NodeLinker        = (*node)(nil)
	_ fs.NodeUnlinker      = (*node)(nil)
	_ fs.NodeRmdirer       = (*node)(nil)
	_ fs.NodeRenamer       = (*node)(nil)
	_ fs.NodeReaddirer     = (*node)(nil)
	_ fs.NodeReadlinker    = (*node)(nil)
	_ fs.NodeOpener        = (*node)(nil)
	_ fs.NodeGetxattrer    = (*node)(nil)
	_ fs.NodeSetxattrer    = (*node)(nil)
	_ fs.NodeListxattrer   = (*node)(nil)
	_ fs.NodeRemovexattrer = (*node)(nil)
	_ fs.NodeFsyncer       = (*node)(nil)
)

// opCtx is the context of an engine call. FUSE interrupts are deliberately
// not propagated: a mutation cancelled in flight may still commit, and the
// client's retry budget already bounds every call.
func opCtx() context.Context { return context.Background() }

func (n *node) ino() uint64 { return n.StableAttr().Ino }

// errno converts an engine error into the kernel's answer, logging the
// outcomes an operator must be able to find.
func (f *filesystem) errno(op string, ino uint64, err error) syscall.Errno {
	if err == nil {
		return 0
	}
	e := client.ToErrno(err)
	var plain syscall.Errno
	if !errors.As(err, &plain) {
		f.log.Warn("volume operation failed", "op", op, "ino", ino, "errno", e.Error(), "error", err,
			"uncertain", errors.Is(err, client.ErrUncertain))
	}
	return e
}

// remember records the attributes the engine returned for this node.
func (n *node) remember(a client.Attr) {
	n.mu.Lock()
	n.attr, n.seen, n.exact = a, true, true
	n.mu.Unlock()
}

// cached returns the last attributes seen, when the cache may be trusted.
func (n *node) cached() (client.Attr, bool) {
	if !n.fsys.opt.SingleWriter {
		return client.Attr{}, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.attr, n.seen
}

// fill converts engine attributes into the kernel's.
func (f *filesystem) fill(a client.Attr, out *fuse.Attr) {
	out.Ino = a.Ino
	out.Size = a.Size
	out.Blocks = a.Blocks()
	out.Mode = a.Mode
	out.Nlink = a.Nlink - min(a.Nlink, f.orphans.links(a.Ino))
	out.Uid, out.Gid = a.UID, a.GID
	out.Rdev = a.Rdev
	out.Blksize = 4096
	out.Atime, out.Atimensec = splitTime(a.Atime)
	out.Mtime, out.Mtimensec = splitTime(a.Mtime)
	out.Ctime, out.Ctimensec = splitTime(a.Ctime)
}

func splitTime(ns int64) (uint64, uint32) {
	if ns < 0 {
		return 0, 0
	}
	return uint64(ns / 1e9), uint32(ns % 1e9)
}

func (f *filesystem) fillEntry(a client.Attr, out *fuse.EntryOut) {
	f.fill(a, &out.Attr)
	out.SetEntryTimeout(f.opt.entryTTL())
	out.SetAttrTimeout(f.opt.attrTTL())
}

// child returns the go-fuse Inode for engine attributes a below n.
func (n *node) child(ctx context.Context, a client.Attr) *fs.Inode {
	c := &node{fsys: n.fsys}
	c.remember(a)
	in := n.NewInode(ctx, c, fs.StableAttr{Mode: a.Mode & syscall.S_IFMT, Ino: a.Ino})
	if existing, ok := in.Operations().(*node); ok && existing != c {
		existing.remember(a)
	}
	return in
}

// Lookup resolves name in this directory.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := nameFits(name); e != 0 {
		return nil, e
	}
	if n.hidden(name) || n.fsys.names.absent(n.ino(), name) {
		return nil, syscall.ENOENT
	}
	a, err := n.fsys.cl.Lookup(opCtx(), n.ino(), name)
	if err != nil {
		return nil, n.fsys.errno("lookup", n.ino(), err)
	}
	if n.fsys.wb != nil && n.fsys.wb.busy(a.Ino) {
		// The kernel forgot a file it is still writing: its size must
		// include the queued writes.
		n.fsys.wb.drain(a.Ino)
		if a, err = n.fsys.cl.GetAttr(opCtx(), a.Ino); err != nil {
			return nil, n.fsys.errno("lookup", n.ino(), err)
		}
	}
	n.fsys.fillEntry(a, out)
	return n.child(ctx, a), 0
}

// Getattr asks the coordinator (the kernel caches the answer for the TTL).
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if a, ok := n.exactDirAttr(); ok {
		n.fsys.fill(a, &out.Attr)
		out.SetTimeout(n.fsys.opt.attrTTL())
		return 0
	}
	n.fsys.settle(n.ino())
	a, err := n.fsys.cl.GetAttr(opCtx(), n.ino())
	if err != nil {
		return n.fsys.errno("getattr", n.ino(), err)
	}
	n.remember(a)
	n.fsys.fill(a, &out.Attr)
	out.SetTimeout(n.fsys.opt.attrTTL())
	return 0
}

// Setattr changes mode, owner, size and times. Whether the caller may is
// the kernel's decision (default_permissions runs setattr_prepare first).
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.fsys.opt.ReadOnly {
		return syscall.EROFS
	}
	// Truncation and times apply after the writes before them.
	n.fsys.settle(n.ino())
	var s client.SetAttrIn
	if m, ok := in.GetMode(); ok {
		s.Valid |= client.SetMode
		s.Mode = m
	}
	if u, ok := in.GetUID(); ok {
		s.Valid |= client.SetUID
		s.UID = u
	}
	if g, ok := in.GetGID(); ok {
		s.Valid |= client.SetGID
		s.GID = g
	}
	if sz, ok := in.GetSize(); ok {
		s.Valid |= client.SetSize
		s.Size = sz
	}
	switch {
	case in.Valid&fuse.FATTR_ATIME_NOW != 0:
		s.Valid |= client.SetAtimeNow
	case in.Valid&fuse.FATTR_ATIME != 0:
		s.Valid |= client.SetAtime
		s.Atime = int64(in.Atime)*1e9 + int64(in.Atimensec)
	}
	switch {
	case in.Valid&fuse.FATTR_MTIME_NOW != 0:
		s.Valid |= client.SetMtimeNow
	case in.Valid&fuse.FATTR_MTIME != 0:
		s.Valid |= client.SetMtime
		s.Mtime = int64(in.Mtime)*1e9 + int64(in.Mtimensec)
	}
	var a client.Attr
	var err error
	if s.Valid == 0 {
		a, err = n.fsys.cl.GetAttr(opCtx(), n.ino())
	} else {
		a, err = n.fsys.cl.SetAttr(opCtx(), n.ino(), s)
	}
	if err != nil {
		n.dirChanged() // an uncertain change may have happened
		return n.fsys.errno("setattr", n.ino(), err)
	}
	n.remember(a)
	n.fsys.fill(a, &out.Attr)
	out.SetTimeout(n.fsys.opt.attrTTL())
	return 0
}

// Fsync of an open file drains and reports its writes (file.go). A
// directory has nothing to wait for: every change of its names was
// committed on a quorum before it was answered. (go-fuse
// routes a directory's FSYNCDIR here; without this method it answers
// EOPNOTSUPP, which applications take for a failed commit.)
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Fsync(ctx, flags)
	}
	n.fsys.settle(n.ino())
	return 0
}

// Statfs reports the volume's capacity; writes past it fail with ENOSPC.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	st, err := n.fsys.cl.StatFs(opCtx())
	if err != nil {
		return n.fsys.errno("statfs", n.ino(), err)
	}
	const bsize = 4096
	out.Bsize, out.Frsize, out.NameLen = bsize, bsize, wire.MaxName
	out.Blocks = st.Capacity / bsize
	free := (st.Capacity - min(st.Capacity, st.Used)) / bsize
	out.Bfree, out.Bavail = free, free
	// Inodes are not limited by the engine beyond its metadata store.
	const files = 1 << 32
	out.Files = files
	out.Ffree = files - min(files, st.Inodes)
	return 0
}
