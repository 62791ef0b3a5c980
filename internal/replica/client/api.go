package client

import (
	"context"
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// Types shared with the worker.
type (
	Attr     = wire.Attr
	DirEntry = wire.DirEntry
	StatFs   = wire.StatFs
	Result   = wire.Result
)

// Flag values re-exported for callers.
const (
	RootIno         = wire.RootIno
	RenameNoReplace = wire.RenameNoReplace
	RenameExchange  = wire.RenameExchange
	KeepOrphan      = wire.KeepOrphan
	XattrCreate     = wire.XattrCreate
	XattrReplace    = wire.XattrReplace
	FallocKeepSize  = wire.FallocKeepSize
	FallocPunchHole = wire.FallocPunchHole
	SetMode         = wire.SetMode
	SetUID          = wire.SetUID
	SetGID          = wire.SetGID
	SetSize         = wire.SetSize
	SetAtime        = wire.SetAtime
	SetMtime        = wire.SetMtime
	SetAtimeNow     = wire.SetAtimeNow
	SetMtimeNow     = wire.SetMtimeNow
)

// SetAttrIn says which attributes SetAttr changes (Valid is a mask of Set*
// bits) and their new values. Times are Unix nanoseconds.
type SetAttrIn struct {
	Valid uint32
	Mode  uint32
	UID   uint32
	GID   uint32
	Size  uint64
	Atime int64
	Mtime int64
}

// WriteReq is one write of a WriteBatch.
type WriteReq struct {
	Ino    uint64
	Offset uint64
	Data   []byte
}

func (c *Client) one(ctx context.Context, op wire.Op) (wire.Result, error) {
	res, err := c.mutate(ctx, []wire.Op{op})
	if err != nil {
		return wire.Result{}, err
	}
	return res[0], res[0].Err()
}

func (c *Client) ask(ctx context.Context, op wire.Op) (wire.Result, error) {
	res, err := c.query(ctx, op)
	if err != nil {
		return res, err
	}
	return res, res.Err()
}

// Lookup resolves name in directory parent.
func (c *Client) Lookup(ctx context.Context, parent uint64, name string) (Attr, error) {
	r, err := c.ask(ctx, wire.Op{Kind: wire.KindLookup, Ino: parent, Name: name})
	return r.Attr, err
}

// GetAttr returns an inode's attributes.
func (c *Client) GetAttr(ctx context.Context, ino uint64) (Attr, error) {
	r, err := c.ask(ctx, wire.Op{Kind: wire.KindGetattr, Ino: ino})
	return r.Attr, err
}

// SetAttr changes the attributes in.Valid names.
func (c *Client) SetAttr(ctx context.Context, ino uint64, in SetAttrIn) (Attr, error) {
	r, err := c.one(ctx, wire.Op{Kind: wire.KindSetattr, Ino: ino, Valid: in.Valid, Mode: in.Mode,
		UID: in.UID, GID: in.GID, Size: in.Size, Atime: in.Atime, Mtime: in.Mtime})
	return r.Attr, err
}

// Create makes a regular file (mode's permission bits; the type is implied).
func (c *Client) Create(ctx context.Context, parent uint64, name string, mode, uid, gid uint32) (Attr, error) {
	r, err := c.one(ctx, wire.Op{Kind: wire.KindCreate, Ino: parent, Name: name,
		Mode: syscall.S_IFREG | mode&^syscall.S_IFMT, UID: uid, GID: gid})
	return r.Attr, err
}

// Mkdir makes a directory.
func (c *Client) Mkdir(ctx context.Context, parent uint64, name string, mode, uid, gid uint32) (Attr, error) {
	r, err := c.one(ctx, wire.Op{Kind: wire.KindMkdir, Ino: parent, Name: name,
		Mode: syscall.S_IFDIR | mode&^syscall.S_IFMT, UID: uid, GID: gid})
	return r.Attr, err
}

// Mknod makes a device, FIFO, socket or regular file; mode carries the type.
func (c *Client) Mknod(ctx context.Context, parent uint64, name string, mode, rdev, uid, gid uint32) (Attr, error) {
	r, err := c.one(ctx, wire.Op{Kind: wire.KindMknod, Ino: parent, Name: name, Mode: mode, Rdev: rdev, UID: uid, GID: gid})
	return r.Attr, err
}

// Symlink makes a symbolic link to target.
func (c *Client) Symlink(ctx context.Context, parent uint64, name, target string, uid, gid uint32) (Attr, error) {
	r, err := c.one(ctx, wire.Op{Kind: wire.KindSymlink, Ino: parent, Name: name, Data: []byte(target), UID: uid, GID: gid})
	return r.Attr, err
}

// Link makes a hard link to ino named newName in newParent.
func (c *Client) Link(ctx context.Context, ino, newParent uint64, newName string) (Attr, error) {
	r, err := c.one(ctx, wire.Op{Kind: wire.KindLink, Ino: ino, Ino2: newParent, Name: newName})
	return r.Attr, err
}

// Unlink removes a non-directory entry.
func (c *Client) Unlink(ctx context.Context, parent uint64, name string) error {
	_, err := c.one(ctx, wire.Op{Kind: wire.KindUnlink, Ino: parent, Name: name})
	return err
}

// UnlinkFlags is Unlink with flags: KeepOrphan keeps the inode (readable,
// writable, stat-able by number, nlink 0) while the caller holds it open,
// until Release.
func (c *Client) UnlinkFlags(ctx context.Context, parent uint64, name string, flags uint32) error {
	_, err := c.one(ctx, wire.Op{Kind: wire.KindUnlink, Ino: parent, Name: name, Flags: flags})
	return err
}

// Release frees an inode kept by KeepOrphan once the caller's last handle
// closes. Releasing a linked or unknown inode is a no-op. Orphans of a
// session are also freed when the volume evicts that session.
func (c *Client) Release(ctx context.Context, ino uint64) error {
	_, err := c.one(ctx, wire.Op{Kind: wire.KindRelease, Ino: ino})
	return err
}

// Rmdir removes an empty directory.
func (c *Client) Rmdir(ctx context.Context, parent uint64, name string) error {
	_, err := c.one(ctx, wire.Op{Kind: wire.KindRmdir, Ino: parent, Name: name})
	return err
}

// Rename moves an entry; flags is 0, RenameNoReplace or RenameExchange,
// optionally with KeepOrphan for a replaced target the caller holds open.
func (c *Client) Rename(ctx context.Context, oldParent uint64, oldName string, newParent uint64, newName string, flags uint32) error {
	_, err := c.one(ctx, wire.Op{Kind: wire.KindRename, Ino: oldParent, Name: oldName, Ino2: newParent, Name2: newName, Flags: flags})
	return err
}

// Write writes all of data at off and returns the new attributes. Data
// larger than wire.MaxData is rejected with EFBIG.
func (c *Client) Write(ctx context.Context, ino, off uint64, data []byte) (Attr, error) {
	if len(data) > wire.MaxData {
		return Attr{}, syscall.EFBIG
	}
	r, err := c.one(ctx, wire.Op{Kind: wire.KindWrite, Ino: ino, Offset: off, Data: data})
	return r.Attr, err
}

// Append writes all of data at the file's end as decided by the
// coordinator (O_APPEND) and returns the offset it landed at.
func (c *Client) Append(ctx context.Context, ino uint64, data []byte) (uint64, Attr, error) {
	if len(data) > wire.MaxData {
		return 0, Attr{}, syscall.EFBIG
	}
	r, err := c.one(ctx, wire.Op{Kind: wire.KindWrite, Ino: ino, Flags: wire.WriteAppend, Data: data})
	return r.N, r.Attr, err
}

// WriteBatch commits several writes in one log entry (one quorum round and
// one journal fsync). Each write has its own result; err reports the batch.
func (c *Client) WriteBatch(ctx context.Context, writes []WriteReq) ([]Result, error) {
	ops := make([]wire.Op, len(writes))
	for i, w := range writes {
		if len(w.Data) > wire.MaxData {
			return nil, syscall.EFBIG
		}
		ops[i] = wire.Op{Kind: wire.KindWrite, Ino: w.Ino, Offset: w.Offset, Data: w.Data}
	}
	return c.mutate(ctx, ops)
}

// Read reads up to size bytes at off; fewer at the end of the file.
func (c *Client) Read(ctx context.Context, ino, off uint64, size uint32) ([]byte, error) {
	r, err := c.ask(ctx, wire.Op{Kind: wire.KindRead, Ino: ino, Offset: off, Size: uint64(size)})
	return r.Data, err
}

// ReadFrame is Read without a copy: data lies in the received frame, a
// pooled buffer the caller returns with wire.PutBuf(frame) once it no longer
// uses data (frame may be nil; dropping it is also safe).
func (c *Client) ReadFrame(ctx context.Context, ino, off uint64, size uint32) (data, frame []byte, err error) {
	r, err := c.ask(ctx, wire.Op{Kind: wire.KindRead, Ino: ino, Offset: off, Size: uint64(size)})
	if err != nil {
		return nil, nil, err
	}
	return r.Data, r.Frame, nil
}

// Truncate sets a file's size.
func (c *Client) Truncate(ctx context.Context, ino, size uint64) (Attr, error) {
	r, err := c.one(ctx, wire.Op{Kind: wire.KindTruncate, Ino: ino, Size: size})
	return r.Attr, err
}

// Fallocate reserves (or, with FallocPunchHole|FallocKeepSize, frees) a range.
func (c *Client) Fallocate(ctx context.Context, ino uint64, mode uint32, off, length uint64) (Attr, error) {
	r, err := c.one(ctx, wire.Op{Kind: wire.KindFallocate, Ino: ino, Flags: mode, Offset: off, Size: length})
	return r.Attr, err
}

// Readdir lists up to max entries of a directory starting at the offset-th
// entry (in name order); "." and ".." are not included.
func (c *Client) Readdir(ctx context.Context, ino, offset uint64, max uint32) ([]DirEntry, error) {
	r, err := c.ask(ctx, wire.Op{Kind: wire.KindReaddir, Ino: ino, Offset: offset, Size: uint64(max)})
	return r.Entries, err
}

// Readlink returns a symbolic link's target.
func (c *Client) Readlink(ctx context.Context, ino uint64) (string, error) {
	r, err := c.ask(ctx, wire.Op{Kind: wire.KindReadlink, Ino: ino})
	return string(r.Data), err
}

// GetXattr returns an extended attribute's value (ENODATA when absent).
func (c *Client) GetXattr(ctx context.Context, ino uint64, name string) ([]byte, error) {
	r, err := c.ask(ctx, wire.Op{Kind: wire.KindGetxattr, Ino: ino, Name: name})
	return r.Data, err
}

// SetXattr sets an extended attribute; flags is 0, XattrCreate or XattrReplace.
func (c *Client) SetXattr(ctx context.Context, ino uint64, name string, value []byte, flags uint32) error {
	_, err := c.one(ctx, wire.Op{Kind: wire.KindSetxattr, Ino: ino, Name: name, Data: value, Flags: flags})
	return err
}

// ListXattr lists extended attribute names.
func (c *Client) ListXattr(ctx context.Context, ino uint64) ([]string, error) {
	r, err := c.ask(ctx, wire.Op{Kind: wire.KindListxattr, Ino: ino})
	return r.Names, err
}

// RemoveXattr removes an extended attribute (ENODATA when absent).
func (c *Client) RemoveXattr(ctx context.Context, ino uint64, name string) error {
	_, err := c.one(ctx, wire.Op{Kind: wire.KindRemovexattr, Ino: ino, Name: name})
	return err
}

// StatFs reports the volume's capacity and use.
func (c *Client) StatFs(ctx context.Context) (StatFs, error) {
	r, err := c.ask(ctx, wire.Op{Kind: wire.KindStatfs, Ino: wire.RootIno})
	return r.StatFs, err
}
