package fsm

import (
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// regular returns the regular file ino or the errno Linux reports.
func (f *FSM) regular(ino uint64) (*inode, uint32) {
	n := f.st.Inodes[ino]
	switch {
	case n == nil:
		return nil, uint32(syscall.ENOENT)
	case n.isDir():
		return nil, uint32(syscall.EISDIR)
	case !n.Attr.IsRegular():
		return nil, uint32(syscall.EINVAL)
	}
	return n, 0
}

// grow checks that n may become size bytes within the volume's capacity.
func (f *FSM) grow(n *inode, size uint64) uint32 {
	if size > wire.MaxFileSize {
		return uint32(syscall.EFBIG)
	}
	if size > n.Attr.Size && f.st.Used+size-n.Attr.Size > f.limits().Capacity {
		return uint32(syscall.ENOSPC)
	}
	return 0
}

func (f *FSM) resize(n *inode, size uint64) {
	f.st.Used = f.st.Used - n.Attr.Size + size
	n.Attr.Size = size
}

func (f *FSM) write(op *wire.Op) wire.Result {
	n, e := f.regular(op.Ino)
	if e != 0 {
		return wire.Result{Errno: e}
	}
	if op.Flags&wire.WriteAppend != 0 {
		op.Offset = n.Attr.Size
	}
	end := op.Offset + uint64(len(op.Data))
	if op.Offset > wire.MaxFileSize || end > wire.MaxFileSize {
		return errno(syscall.EFBIG)
	}
	if e := f.grow(n, end); e != 0 {
		return wire.Result{Errno: e}
	}
	if err := f.store.WriteAt(op.Ino, op.Data, op.Offset); err != nil {
		f.fail(err)
		return errno(syscall.EIO)
	}
	if end > n.Attr.Size {
		f.resize(n, end)
	}
	touch(n, op.Time)
	// N is the offset written at, so an appender learns where its data went.
	return wire.Result{Attr: n.Attr, N: op.Offset}
}

func (f *FSM) truncate(ino, size uint64, now int64) wire.Result {
	n, e := f.regular(ino)
	if e != 0 {
		return wire.Result{Errno: e}
	}
	if e := f.grow(n, size); e != 0 {
		return wire.Result{Errno: e}
	}
	if err := f.store.Truncate(ino, size); err != nil {
		f.fail(err)
		return errno(syscall.EIO)
	}
	f.resize(n, size)
	touch(n, now)
	return wire.Result{Attr: n.Attr}
}

func (f *FSM) fallocate(op *wire.Op) wire.Result {
	n, e := f.regular(op.Ino)
	if e != 0 {
		return wire.Result{Errno: e}
	}
	// Bounds first: off+len must not overflow, and a backing-file call with
	// arguments it rejects would stop the replica as a disk failure.
	if op.Size == 0 || op.Offset > wire.MaxFileSize || op.Size > wire.MaxFileSize || op.Offset+op.Size > wire.MaxFileSize {
		return errno(syscall.EINVAL)
	}
	end := op.Offset + op.Size
	keep := op.Flags&wire.FallocKeepSize != 0
	switch op.Flags {
	case 0, wire.FallocKeepSize, wire.FallocKeepSize | wire.FallocPunchHole:
	default:
		return errno(syscall.EOPNOTSUPP)
	}
	if !keep {
		if e := f.grow(n, end); e != 0 {
			return wire.Result{Errno: e}
		}
	}
	// A reservation (modes 0 and KEEP_SIZE) changes only the size: the
	// chunk store holds no hole (docs/decisions/0010-chunked-store.md).
	if op.Flags&wire.FallocPunchHole != 0 {
		if err := f.store.Punch(op.Ino, op.Offset, op.Size); err != nil {
			f.fail(err)
			return errno(syscall.EIO)
		}
	}
	if !keep && end > n.Attr.Size {
		f.resize(n, end)
	}
	n.Attr.Ctime = op.Time
	return wire.Result{Attr: n.Attr}
}

func (f *FSM) setattr(op *wire.Op) wire.Result {
	n := f.st.Inodes[op.Ino]
	if n == nil {
		return errno(syscall.ENOENT)
	}
	if op.Valid&wire.SetSize != 0 {
		if r := f.truncate(op.Ino, op.Size, op.Time); r.Errno != 0 {
			return r
		}
	}
	if op.Valid&wire.SetMode != 0 {
		n.Attr.Mode = n.Attr.Mode&syscall.S_IFMT | op.Mode&^syscall.S_IFMT
	}
	if op.Valid&wire.SetUID != 0 {
		n.Attr.UID = op.UID
	}
	if op.Valid&wire.SetGID != 0 {
		n.Attr.GID = op.GID
	}
	switch {
	case op.Valid&wire.SetAtimeNow != 0:
		n.Attr.Atime = op.Time
	case op.Valid&wire.SetAtime != 0:
		n.Attr.Atime = op.Atime
	}
	switch {
	case op.Valid&wire.SetMtimeNow != 0:
		n.Attr.Mtime = op.Time
	case op.Valid&wire.SetMtime != 0:
		n.Attr.Mtime = op.Mtime
	}
	n.Attr.Ctime = op.Time
	return wire.Result{Attr: n.Attr}
}

func (f *FSM) setxattr(op *wire.Op) wire.Result {
	n := f.st.Inodes[op.Ino]
	if n == nil {
		return errno(syscall.ENOENT)
	}
	if op.Name == "" || len(op.Name) > wire.MaxName {
		return errno(syscall.ERANGE)
	}
	if len(op.Data) > wire.MaxXattrValue {
		return errno(syscall.E2BIG)
	}
	_, exists := n.Xattrs[op.Name]
	switch {
	case op.Flags&wire.XattrCreate != 0 && exists:
		return errno(syscall.EEXIST)
	case op.Flags&wire.XattrReplace != 0 && !exists:
		return errno(syscall.ENODATA)
	}
	if n.Xattrs == nil {
		n.Xattrs = map[string][]byte{}
	}
	n.Xattrs[op.Name] = append([]byte{}, op.Data...)
	n.Attr.Ctime = op.Time
	return wire.Result{}
}

func (f *FSM) removexattr(op *wire.Op) wire.Result {
	n := f.st.Inodes[op.Ino]
	if n == nil {
		return errno(syscall.ENOENT)
	}
	if _, ok := n.Xattrs[op.Name]; !ok {
		return errno(syscall.ENODATA)
	}
	delete(n.Xattrs, op.Name)
	n.Attr.Ctime = op.Time
	return wire.Result{}
}
