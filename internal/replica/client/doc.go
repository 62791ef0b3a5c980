// Package client is the replicated volume's client for the FUSE mount owner.
//
// A Client holds one authenticated TLS stream (bearer token, the volume's CA,
// the worker's SAN verified) to the volume's current coordinator and follows
// "not coordinator, try X" answers by itself. The API is inode based and maps
// one to one onto FUSE low-level operations:
//
//	Lookup(ctx, parent, name) (Attr, error)
//	GetAttr(ctx, ino) (Attr, error)
//	SetAttr(ctx, ino, SetAttrIn) (Attr, error)
//	Create / Mkdir(ctx, parent, name, mode, uid, gid) (Attr, error)
//	Mknod(ctx, parent, name, mode, rdev, uid, gid) (Attr, error)
//	Symlink(ctx, parent, name, target, uid, gid) (Attr, error)
//	Link(ctx, ino, newParent, newName) (Attr, error)
//	Unlink / Rmdir(ctx, parent, name) error
//	UnlinkFlags(ctx, parent, name, KeepOrphan) error // unlink an open file
//	Release(ctx, ino) error                         // last close of an orphan
//	Rename(ctx, oldParent, oldName, newParent, newName, flags) error
//	Write(ctx, ino, off, data) (Attr, error)      // all of data, or an error
//	Append(ctx, ino, data) (off, Attr, error)     // O_APPEND: offset decided at apply
//	WriteBatch(ctx, []WriteReq) ([]Result, error) // many writes, one log entry
//	Read(ctx, ino, off, size) ([]byte, error)      // short at end of file
//	Truncate(ctx, ino, size) (Attr, error)
//	Fallocate(ctx, ino, mode, off, length) (Attr, error)
//	Readdir(ctx, ino, offset, max) ([]DirEntry, error)
//	Readlink(ctx, ino) (string, error)
//	GetXattr / SetXattr / ListXattr / RemoveXattr
//	StatFs(ctx) (StatFs, error)
//	OpenFence(ctx) (epoch, error) // single-writer mounts: fence every older one
//	ReserveInos(ctx, n) (first, error)               // inode numbers for CreateReserved
//	CreateReserved(ctx, parent, name, Attr) error    // create with a reserved number (reserved.go)
//
// Errors. A file system error is a syscall.Errno (ENOENT, EEXIST, ENOSPC,
// ...), which go-fuse's fs.ToErrno passes through. Protocol outcomes are
// sentinel errors: ErrUncertain (a mutation may or may not have been applied:
// the mount owner reports EIO, documented as an uncertain result),
// ErrUnavailable (no coordinator with a quorum within the retry budget;
// nothing was applied), ErrFenced (a newer single-writer mount opened a newer
// fencing epoch: nothing applied or read, never retried), ErrUnauthorized,
// ErrClosed. ToErrno maps any error to
// the errno the kernel should see.
//
// Exactly-once. Every mutation carries (client ID, sequence). A retry after a
// lost reply or a coordinator change reuses the same identity, so the state
// machine returns the first result instead of applying twice. If the
// session has been evicted from the bounded exactly-once table, an operation
// that might already have applied returns ErrUncertain; the client then
// registers a fresh session for later operations.
//
// Concurrency. A Client is safe for concurrent use; calls are multiplexed on
// one stream and the coordinator commits concurrent calls together.
//
// The package must never import the worker, the state machine or raft.
package client
