package fsm

import (
	"slices"
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// dir returns the directory ino or the errno Linux reports.
func (f *FSM) dir(ino uint64) (*inode, uint32) {
	n := f.st.Inodes[ino]
	if n == nil {
		return nil, uint32(syscall.ENOENT)
	}
	if !n.isDir() {
		return nil, uint32(syscall.ENOTDIR)
	}
	return n, 0
}

func (f *FSM) makeNode(op *wire.Op) wire.Result {
	parent, e := f.dir(op.Ino)
	if e != 0 {
		return wire.Result{Errno: e}
	}
	if e := validName(op.Name); e != 0 {
		return wire.Result{Errno: e}
	}
	if _, ok := parent.Children[op.Name]; ok {
		return errno(syscall.EEXIST)
	}
	if !f.freshIno(op) {
		// The coordinator allocates above every number used, or checks a
		// reserved one; anything else is a coordinator fault, refused
		// identically on every replica.
		return errno(syscall.EIO)
	}
	mode, e := nodeMode(op)
	if e != 0 {
		return wire.Result{Errno: e}
	}
	n := &inode{Attr: wire.NewAttr(op.NewIno, mode, op.UID, op.GID, op.Time)}
	switch {
	case op.Kind == wire.KindMkdir:
		n.Attr.Nlink = 2
		n.Parent = op.Ino
		n.Children = map[string]uint64{}
		parent.Attr.Nlink++
	case op.Kind == wire.KindSymlink:
		n.Target = append([]byte(nil), op.Data...)
		n.Attr.Size = uint64(len(op.Data))
	case op.Kind == wire.KindMknod:
		n.Attr.Rdev = op.Rdev
	}
	f.st.Inodes[op.NewIno] = n
	f.st.NextIno = max(f.st.NextIno, op.NewIno+1)
	parent.addChild(op.Name, op.NewIno)
	if reserved(op) {
		// The client's clock, and creates answered before their commit
		// may commit in another order than their times: the directory
		// keeps the newest, as the mount that answered them does.
		touch(parent, max(op.Time, parent.Attr.Mtime))
	} else {
		touch(parent, op.Time)
	}
	return wire.Result{Attr: n.Attr}
}

// freshIno reports whether op's NewIno may become a new inode: above every
// number handed out, or for a create with ReservedIno, a number below them
// (ReserveInos handed it to the client: reserve.go) that no inode holds.
// A reserved number is not remembered as spent, so a client that reused one
// after its inode was removed would get it again; the mount takes each once.
func (f *FSM) freshIno(op *wire.Op) bool {
	if op.NewIno <= wire.RootIno || f.st.Inodes[op.NewIno] != nil {
		return false
	}
	if reserved(op) {
		return op.NewIno < f.st.NextIno
	}
	return op.NewIno >= f.st.NextIno
}

// reserved reports a create whose inode number and time the client chose.
func reserved(op *wire.Op) bool {
	return op.Kind == wire.KindCreate && op.Flags&wire.ReservedIno != 0
}

func nodeMode(op *wire.Op) (uint32, uint32) {
	perm := op.Mode &^ syscall.S_IFMT
	switch op.Kind {
	case wire.KindCreate:
		return syscall.S_IFREG | perm, 0
	case wire.KindMkdir:
		return syscall.S_IFDIR | perm, 0
	case wire.KindSymlink:
		if len(op.Data) == 0 {
			return 0, uint32(syscall.ENOENT)
		}
		if len(op.Data) > wire.MaxSymlink {
			return 0, uint32(syscall.ENAMETOOLONG)
		}
		return syscall.S_IFLNK | 0o777, 0
	}
	switch op.Mode & syscall.S_IFMT {
	case 0, syscall.S_IFREG:
		return syscall.S_IFREG | perm, 0
	case syscall.S_IFCHR, syscall.S_IFBLK, syscall.S_IFIFO, syscall.S_IFSOCK:
		return op.Mode, 0
	default:
		return 0, uint32(syscall.EINVAL)
	}
}

func touch(n *inode, now int64) {
	n.Attr.Mtime = now
	n.Attr.Ctime = now
}

func (f *FSM) link(op *wire.Op) wire.Result {
	target := f.st.Inodes[op.Ino]
	if target == nil {
		return errno(syscall.ENOENT)
	}
	if target.isDir() {
		return errno(syscall.EPERM)
	}
	parent, e := f.dir(op.Ino2)
	if e != 0 {
		return wire.Result{Errno: e}
	}
	if e := validName(op.Name); e != 0 {
		return wire.Result{Errno: e}
	}
	if _, ok := parent.Children[op.Name]; ok {
		return errno(syscall.EEXIST)
	}
	parent.addChild(op.Name, op.Ino)
	touch(parent, op.Time)
	target.Attr.Nlink++
	target.Attr.Ctime = op.Time
	return wire.Result{Attr: target.Attr}
}

func (f *FSM) unlink(op *wire.Op, rmdir bool) wire.Result {
	parent, e := f.dir(op.Ino)
	if e != 0 {
		return wire.Result{Errno: e}
	}
	if op.Name == "." {
		return errno(syscall.EINVAL)
	}
	if op.Name == ".." {
		return errno(syscall.ENOTEMPTY)
	}
	ino, ok := parent.Children[op.Name]
	if !ok {
		return errno(syscall.ENOENT)
	}
	n := f.st.Inodes[ino]
	switch {
	case rmdir && !n.isDir():
		return errno(syscall.ENOTDIR)
	case !rmdir && n.isDir():
		return errno(syscall.EISDIR)
	case rmdir && len(n.Children) > 0:
		return errno(syscall.ENOTEMPTY)
	}
	parent.removeChild(op.Name)
	touch(parent, op.Time)
	f.dropLink(parent, n, op)
	return wire.Result{}
}

// dropLink removes one name of n (already unlinked from parent) and frees
// n when no name is left, unless the caller keeps it open (KeepOrphan).
func (f *FSM) dropLink(parent, n *inode, op *wire.Op) {
	if n.isDir() {
		parent.Attr.Nlink--
		f.free(n)
		return
	}
	n.Attr.Nlink--
	n.Attr.Ctime = op.Time
	if n.Attr.Nlink > 0 {
		return
	}
	if op.Flags&wire.KeepOrphan != 0 {
		n.Orphan = op.Session
		return
	}
	f.free(n)
}

// release frees an orphan; releasing a linked or unknown inode is a no-op,
// so a retried or late release is harmless.
func (f *FSM) release(op *wire.Op) wire.Result {
	if n := f.st.Inodes[op.Ino]; n != nil && n.Orphan != 0 && n.Attr.Nlink == 0 {
		f.free(n)
	}
	return wire.Result{}
}

// freeOrphans frees every orphan an evicted session kept.
func (f *FSM) freeOrphans(session uint64) {
	var inos []uint64
	for ino, n := range f.st.Inodes {
		if n.Orphan == session && n.Attr.Nlink == 0 {
			inos = append(inos, ino)
		}
	}
	slices.Sort(inos) // deterministic order of backing-file removal
	for _, ino := range inos {
		f.free(f.st.Inodes[ino])
	}
}

func (f *FSM) free(n *inode) {
	delete(f.st.Inodes, n.Attr.Ino)
	if n.Attr.IsRegular() {
		f.st.Used -= n.Attr.Size
		if err := f.store.Remove(n.Attr.Ino); err != nil {
			f.fail(err)
		}
	}
}

// isAncestor reports whether dir a is dir b or one of b's ancestors.
func (f *FSM) isAncestor(a, b uint64) bool {
	for {
		if a == b {
			return true
		}
		if b == wire.RootIno {
			return false
		}
		b = f.st.Inodes[b].Parent
	}
}

func (f *FSM) rename(op *wire.Op) wire.Result {
	flags := op.Flags &^ wire.KeepOrphan
	if flags&^(wire.RenameNoReplace|wire.RenameExchange) != 0 ||
		flags == wire.RenameNoReplace|wire.RenameExchange {
		return errno(syscall.EINVAL)
	}
	src, e := f.dir(op.Ino)
	if e != 0 {
		return wire.Result{Errno: e}
	}
	dst, e := f.dir(op.Ino2)
	if e != 0 {
		return wire.Result{Errno: e}
	}
	if e := validName(op.Name2); e != 0 {
		return wire.Result{Errno: e}
	}
	ino, ok := src.Children[op.Name]
	if !ok {
		return errno(syscall.ENOENT)
	}
	n := f.st.Inodes[ino]
	oldIno, exists := dst.Children[op.Name2]
	if flags == wire.RenameExchange {
		if !exists {
			return errno(syscall.ENOENT)
		}
		return f.exchange(op, src, dst, n, f.st.Inodes[oldIno])
	}
	if exists && flags == wire.RenameNoReplace {
		return errno(syscall.EEXIST)
	}
	if n.isDir() && f.isAncestor(ino, op.Ino2) {
		return errno(syscall.EINVAL)
	}
	if exists && oldIno == ino {
		return wire.Result{} // both names are links to one inode: nothing to do
	}
	if exists {
		old := f.st.Inodes[oldIno]
		switch {
		case n.isDir() && !old.isDir():
			return errno(syscall.ENOTDIR)
		case !n.isDir() && old.isDir():
			return errno(syscall.EISDIR)
		case old.isDir() && len(old.Children) > 0:
			return errno(syscall.ENOTEMPTY)
		}
		dst.removeChild(op.Name2)
		f.dropLink(dst, old, op)
	}
	src.removeChild(op.Name)
	dst.addChild(op.Name2, ino)
	if n.isDir() && src != dst {
		src.Attr.Nlink--
		dst.Attr.Nlink++
		n.Parent = op.Ino2
	}
	touch(src, op.Time)
	touch(dst, op.Time)
	n.Attr.Ctime = op.Time
	return wire.Result{}
}

func (f *FSM) exchange(op *wire.Op, src, dst, a, b *inode) wire.Result {
	if a.isDir() && f.isAncestor(a.Attr.Ino, op.Ino2) && src != dst {
		return errno(syscall.EINVAL)
	}
	if b.isDir() && f.isAncestor(b.Attr.Ino, op.Ino) && src != dst {
		return errno(syscall.EINVAL)
	}
	src.Children[op.Name] = b.Attr.Ino
	dst.Children[op.Name2] = a.Attr.Ino
	if src != dst {
		if a.isDir() {
			a.Parent = op.Ino2
			src.Attr.Nlink--
			dst.Attr.Nlink++
		}
		if b.isDir() {
			b.Parent = op.Ino
			dst.Attr.Nlink--
			src.Attr.Nlink++
		}
	}
	touch(src, op.Time)
	touch(dst, op.Time)
	a.Attr.Ctime = op.Time
	b.Attr.Ctime = op.Time
	return wire.Result{}
}
