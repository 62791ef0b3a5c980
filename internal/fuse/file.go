package fuse

// Open files: read, write, flush, fsync, release, fallocate, lseek.
//
// On shared volumes a WRITE is answered only after the engine committed it
// on a quorum (write batching joins concurrent writes into one entry). On
// single-writer volumes it is answered once queued (write-behind,
// writeback.go) and flush and fsync wait for the commits. Either way, when
// close or fsync returns, every write before it is committed. File locks
// (flock, POSIX) are the kernel's own, within this mount.

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

type handle struct {
	fsys *filesystem
	ino  uint64
	in   *fs.Inode
	// writer: opened for writing, so its close reports write failures.
	writer bool
	// errs is its position in the file's write-behind error sequence
	// (writeback.go); nil without write-behind.
	errs *errCursor
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
	_ fs.FileLseeker   = (*handle)(nil)
)

// openHandle registers an open file (for the orphan table) opened with
// the open(2) flags.
func (f *filesystem) openHandle(in *fs.Inode, flags uint32) (*handle, syscall.Errno) {
	ino := in.StableAttr().Ino
	if f.orphans.opened(ino) {
		// A name of this inode was removed while the kernel was opening
		// it: the inode may be gone.
		if _, err := f.cl.GetAttr(opCtx(), ino); err != nil {
			f.orphans.closed(ino)
			return nil, f.errno("open", ino, err)
		}
	}
	return f.newHandle(in, flags), 0
}

// newHandle makes the handle of an open file the orphan table knows.
func (f *filesystem) newHandle(in *fs.Inode, flags uint32) *handle {
	h := &handle{fsys: f, ino: in.StableAttr().Ino, in: in,
		writer: flags&syscall.O_ACCMODE != syscall.O_RDONLY}
	if f.wb != nil {
		h.errs = f.wb.opened(h.ino)
	}
	return h
}

// openFlags keeps the page cache across opens on single-writer volumes;
// shared volumes drop it at each open (close-to-open consistency).
func (f *filesystem) openFlags() uint32 {
	if f.opt.SingleWriter {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// Open opens a file. Permission checks are the kernel's.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.fsys.opt.ReadOnly && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EROFS
	}
	h, e := n.fsys.openHandle(n.EmbeddedInode(), flags)
	if e != 0 {
		return nil, 0, e
	}
	return h, n.fsys.openFlags(), 0
}

// Read reads from the coordinator's applied state.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.fsys.settle(h.ino)
	b, frame, err := h.fsys.cl.ReadFrame(opCtx(), h.ino, uint64(off), uint32(len(dest)))
	if err != nil {
		return nil, h.fsys.errno("read", h.ino, err)
	}
	return framedRead(b, frame), 0
}

// Write commits data: it returns once a quorum holds it, or with
// write-behind once it is queued.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.fsys.opt.ReadOnly {
		return 0, syscall.EROFS
	}
	// The engine refuses a write past the largest file whole, with EFBIG;
	// refuse it here too, before write-behind would answer it as queued
	// and leave the refusal to a close.
	if uint64(off) > wire.MaxFileSize || uint64(len(data)) > wire.MaxFileSize-uint64(off) {
		return 0, syscall.EFBIG
	}
	if wb := h.fsys.wb; wb != nil {
		if err := wb.write(h.in, h.errs, uint64(off), data); err != nil {
			return 0, h.fsys.errno("write", h.ino, err)
		}
		return uint32(len(data)), 0
	}
	_, err := h.fsys.batch.write(h.ino, uint64(off), data)
	if err != nil {
		// The kernel's idea of the size may now be wrong (an uncertain
		// write may have extended the file): drop it, after this request
		// has released the pages it holds.
		go h.invalidate()
		return 0, h.fsys.errno("write", h.ino, err)
	}
	return uint32(len(data)), 0
}

// Flush (each close) of a handle open for writing waits for the file's
// queued writes and reports a failure the handle's fsync was not told of,
// without consuming it (writeback.go): a FLUSH also comes from closes the
// writing program never made. A read-only handle's close reports nothing.
// Without write-behind every write was committed when answered.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	if !h.writer || h.fsys.wb == nil {
		return 0
	}
	return h.fsys.errno("flush", h.ino, h.fsys.wb.flush(h.errs))
}

// Fsync waits likewise, for every handle, and reports each failure once
// (committed on a quorum means durable on a quorum).
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if h.fsys.wb == nil {
		return 0
	}
	return h.fsys.errno("fsync", h.ino, h.fsys.wb.sync(h.errs))
}

// Release closes the handle; the last one frees a deleted file.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.fsys.settle(h.ino)
	if h.errs != nil {
		h.fsys.wb.released(h.errs)
	}
	h.fsys.orphans.closed(h.ino)
	return 0
}

// Allocate is fallocate(2): modes 0, KEEP_SIZE and PUNCH_HOLE|KEEP_SIZE.
func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	if h.fsys.opt.ReadOnly {
		return syscall.EROFS
	}
	h.fsys.settle(h.ino)
	_, err := h.fsys.cl.Fallocate(opCtx(), h.ino, mode, off, size)
	go h.invalidate()
	return h.fsys.errno("fallocate", h.ino, err)
}

// Lseek answers SEEK_DATA and SEEK_HOLE: the engine does not report holes,
// so all of a file is data and its only hole is at the end (as POSIX allows).
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	h.fsys.settle(h.ino)
	a, err := h.fsys.cl.GetAttr(opCtx(), h.ino)
	if err != nil {
		return 0, h.fsys.errno("lseek", h.ino, err)
	}
	switch whence {
	case unix.SEEK_DATA:
		if off >= a.Size {
			return 0, syscall.ENXIO
		}
		return off, 0
	case unix.SEEK_HOLE:
		if off > a.Size {
			return 0, syscall.ENXIO
		}
		return a.Size, 0
	}
	return 0, syscall.EINVAL
}

// invalidate drops the kernel's cached attributes and pages of the file.
func (h *handle) invalidate() { _ = h.in.NotifyContent(0, 0) }
