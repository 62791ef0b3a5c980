package fuse

// Fencing of single-writer mounts (docs/fuse.md, "Fencing"). A single-writer
// mount caches names and pages on the strength of being the volume's only
// writer; a second mount of the same volume (a failover while the old node
// is still alive) would make that false. So a
// writable single-writer mount opens a fencing epoch through the engine
// before it serves anything (client.OpenFence): from then on the engine
// refuses every mutation and read of an older epoch. This file is the mount's
// side of the protocol:
//
//   - The gate: once the engine has refused this mount as fenced, every
//     FUSE request (but forget and release, which free kernel references)
//     is answered EIO before it reaches the filesystem, so nothing is served
//     from the mount's own caches either.
//   - Cache dropping: at the same moment every attribute and page the
//     kernel holds for the mount is invalidated (go-fuse notify), so the
//     kernel has to ask, and gets EIO.
//   - The lease: the kernel answers cached reads without asking, so an idle
//     fenced mount would never learn of the fence. The mount checks its epoch
//     every fenceCheckInterval; a check that confirms it is anchored at the
//     moment it was sent. When no check has confirmed the epoch for
//     fenceLease (the engine is unreachable), the kernel's caches are dropped
//     again at every check, so they never outlive the lease. A mount that
//     opens an epoch above 1 (a predecessor may be alive) waits
//     fenceHandover, longer than the lease, before it serves: by then the
//     predecessor has seen the fence or dropped its caches, so no stale page
//     of it is read after the new mount can write.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

const (
	fenceCheckInterval = 500 * time.Millisecond
	fenceLease         = 2 * time.Second
	// fenceHandover adds a quarter of the lease for clock rate differences
	// between the two nodes.
	fenceHandover = fenceLease + fenceLease/4
)

// fence is one mount's fencing state.
type fence struct {
	cl     *client.Client
	log    *slog.Logger
	root   *fs.Inode
	fenced atomic.Bool
}

// openFence opens the mount's epoch and, when a predecessor may be alive,
// waits out its lease.
func openFence(ctx context.Context, cl *client.Client, log *slog.Logger) (*fence, error) {
	epoch, err := cl.OpenFence(ctx)
	if err != nil {
		return nil, err
	}
	if epoch > 1 {
		log.Info("fencing epoch opened; waiting out the previous single-writer mount's cache lease",
			"epoch", epoch, "wait", fenceHandover)
		t := time.NewTimer(fenceHandover)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the previous mount's cache lease: %w", ctx.Err())
		}
	}
	return &fence{cl: cl, log: log}, nil
}

// watch runs until done: it checks the epoch, keeps the lease and trips the
// gate at the first fenced answer of any call.
func (f *fence) watch(done <-chan struct{}) {
	t := time.NewTicker(fenceCheckInterval)
	defer t.Stop()
	confirmed := time.Now()
	for {
		select {
		case <-done:
			return
		case <-f.cl.Fenced():
			f.trip()
			return
		case <-t.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), fenceLease)
		_, err := f.cl.GetAttr(ctx, client.RootIno)
		cancel()
		switch {
		case err == nil:
			confirmed = sent
		case errors.Is(err, client.ErrFenced):
			f.trip()
			return
		case time.Since(confirmed) > fenceLease:
			f.log.Warn("fencing epoch not confirmed within the lease; dropping the kernel's caches",
				"lease", fenceLease, "error", err)
			f.invalidate()
		}
	}
}

// trip closes the gate, then drops everything the kernel caches.
func (f *fence) trip() {
	if f.fenced.Swap(true) {
		return
	}
	f.log.Error("mount fenced: a newer single-writer mount of the volume took over; every request now answers EIO",
		"epoch", f.cl.Epoch())
	f.invalidate()
}

// invalidate drops the kernel's attributes and pages of every inode the
// mount knows. Names stay: every use of a cached name needs its inode's
// attributes or a request (options.go), and dropping a name waits for its
// directory's lock, which an operation waiting for the engine holds for as
// long as it waits, stalling the lease. Errors are the kernel having
// forgotten an inode already.
func (f *fence) invalidate() {
	queue := []*fs.Inode{f.root}
	for len(queue) > 0 {
		in := queue[0]
		queue = queue[1:]
		_ = in.NotifyContent(0, 0)
		for _, ch := range in.Children() {
			queue = append(queue, ch)
		}
	}
}

// fenceGate answers EIO to every request once the mount is fenced.
type fenceGate struct {
	fuse.RawFileSystem
	f *fence
}

func (g *fenceGate) shut() bool { return g.f != nil && g.f.fenced.Load() }

const fencedStatus = fuse.Status(syscall.EIO)

func (g *fenceGate) Lookup(c <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Lookup(c, h, name, out)
}

func (g *fenceGate) GetAttr(c <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.GetAttr(c, in, out)
}

func (g *fenceGate) SetAttr(c <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.SetAttr(c, in, out)
}

func (g *fenceGate) Mknod(c <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Mknod(c, in, name, out)
}

func (g *fenceGate) Mkdir(c <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Mkdir(c, in, name, out)
}

func (g *fenceGate) Unlink(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Unlink(c, h, name)
}

func (g *fenceGate) Rmdir(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Rmdir(c, h, name)
}

func (g *fenceGate) Rename(c <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Rename(c, in, oldName, newName)
}

func (g *fenceGate) Link(c <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Link(c, in, name, out)
}

func (g *fenceGate) Symlink(c <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Symlink(c, h, target, name, out)
}

func (g *fenceGate) Readlink(c <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	if g.shut() {
		return nil, fencedStatus
	}
	return g.RawFileSystem.Readlink(c, h)
}

func (g *fenceGate) Access(c <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Access(c, in)
}

func (g *fenceGate) GetXAttr(c <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if g.shut() {
		return 0, fencedStatus
	}
	return g.RawFileSystem.GetXAttr(c, h, attr, dest)
}

func (g *fenceGate) ListXAttr(c <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	if g.shut() {
		return 0, fencedStatus
	}
	return g.RawFileSystem.ListXAttr(c, h, dest)
}

func (g *fenceGate) SetXAttr(c <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.SetXAttr(c, in, attr, data)
}

func (g *fenceGate) RemoveXAttr(c <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.RemoveXAttr(c, h, attr)
}

func (g *fenceGate) Create(c <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Create(c, in, name, out)
}

func (g *fenceGate) Tmpfile(c <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Tmpfile(c, in, out)
}

func (g *fenceGate) Open(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Open(c, in, out)
}

func (g *fenceGate) Read(c <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if g.shut() {
		return nil, fencedStatus
	}
	return g.RawFileSystem.Read(c, in, buf)
}

func (g *fenceGate) Lseek(c <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Lseek(c, in, out)
}

func (g *fenceGate) GetLk(c <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.GetLk(c, in, out)
}

func (g *fenceGate) SetLk(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.SetLk(c, in)
}

func (g *fenceGate) SetLkw(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.SetLkw(c, in)
}

func (g *fenceGate) Write(c <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if g.shut() {
		return 0, fencedStatus
	}
	return g.RawFileSystem.Write(c, in, data)
}

func (g *fenceGate) Writev(c <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if g.shut() {
		return 0, fencedStatus
	}
	return g.RawFileSystem.Writev(c, in, data)
}

func (g *fenceGate) CopyFileRange(c <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if g.shut() {
		return 0, fencedStatus
	}
	return g.RawFileSystem.CopyFileRange(c, in)
}

func (g *fenceGate) Ioctl(c <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Ioctl(c, in, inbuf, out, outbuf)
}

func (g *fenceGate) Flush(c <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Flush(c, in)
}

func (g *fenceGate) Fsync(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Fsync(c, in)
}

func (g *fenceGate) Fallocate(c <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Fallocate(c, in)
}

func (g *fenceGate) OpenDir(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.OpenDir(c, in, out)
}

func (g *fenceGate) ReadDir(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.ReadDir(c, in, out)
}

func (g *fenceGate) ReadDirPlus(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.ReadDirPlus(c, in, out)
}

func (g *fenceGate) FsyncDir(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.FsyncDir(c, in)
}

func (g *fenceGate) StatFs(c <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.StatFs(c, h, out)
}

func (g *fenceGate) Statx(c <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	if g.shut() {
		return fencedStatus
	}
	return g.RawFileSystem.Statx(c, in, out)
}
