package fuse

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// FSType is the mount table's type suffix: mounts show as "fuse.cellfleet".
const FSType = "cellfleet"

// Mount is one mounted volume.
type Mount struct {
	target string
	srv    *fuse.Server
	fsys   *filesystem
	once   sync.Once
	done   chan struct{}
}

// MountVolume mounts the volume cl reaches at target and serves it until
// Unmount. The client is the mount's: Unmount closes it.
func MountVolume(ctx context.Context, target string, cl *client.Client, o Options) (*Mount, error) {
	opt, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	fsys := &filesystem{cl: cl, opt: opt, log: opt.Logger.With("volume", opt.Volume, "target", target)}
	fsys.orphans = newOrphans(cl, opt.OwnerKey)
	// A writable single-writer mount fences every older one before it
	// reads or changes anything (fence.go).
	var fc *fence
	if opt.fenced() {
		if fc, err = openFence(ctx, cl, fsys.log); err != nil {
			return nil, fmt.Errorf("volume %s: %w", opt.Volume, err)
		}
	}
	// The root must answer before the kernel is involved: a volume without
	// a quorum fails the mount instead of hanging the first stat.
	root, err := cl.GetAttr(ctx, client.RootIno)
	if err != nil {
		return nil, fmt.Errorf("volume %s: read the root directory: %w", opt.Volume, err)
	}
	if !opt.ReadOnly {
		if err := fsys.orphans.sweep(); err != nil {
			return nil, fmt.Errorf("volume %s: remove orphans of an earlier mount: %w", opt.Volume, err)
		}
	}
	fsys.batch = newBatcher(cl, opt.Batch)
	if opt.writeBehind() {
		fsys.wb = newWriteback(fsys.batch, opt.WritebackBytes)
	}
	if opt.SingleWriter && !opt.ReadOnly && !opt.NoNameCache {
		fsys.names = newNames()
	}
	rootNode := &node{fsys: fsys}
	rootNode.remember(root)
	fsys.orphans.rootChanged = rootNode.dirChanged
	srv, err := serve(target, rootNode, fsys.fsOptions(), fc)
	if err != nil {
		fsys.batch.close()
		return nil, fmt.Errorf("mount volume %s at %s: %w", opt.Volume, target, err)
	}
	if opt.ReadAheadWindow > 0 {
		// A mount without it still works, with 128 KiB sequential reads.
		if err := SetReadAheadWindow(target, opt.ReadAheadWindow); err != nil {
			fsys.log.Warn("sequential reads keep the kernel's default readahead", "error", err)
		}
	}
	m := &Mount{target: target, srv: srv, fsys: fsys, done: make(chan struct{})}
	go func() {
		srv.Wait()
		m.finish()
	}()
	if fc != nil {
		fc.root = rootNode.EmbeddedInode()
		go fc.watch(m.done)
	}
	fsys.log.Info("volume mounted", "singleWriter", opt.SingleWriter, "readOnly", opt.ReadOnly,
		"fencingEpoch", cl.Epoch())
	return m, nil
}

// serve is fs.Mount with the fencing gate between the kernel and the node
// tree (fc nil: no gate).
func serve(target string, root fs.InodeEmbedder, o *fs.Options, fc *fence) (*fuse.Server, error) {
	var raw fuse.RawFileSystem = fs.NewNodeFS(root, o)
	if fc != nil {
		raw = &fenceGate{RawFileSystem: raw, f: fc}
	}
	srv, err := fuse.NewServer(raw, target, &o.MountOptions)
	if err != nil {
		return nil, err
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		// As fs.Mount: a mount that did not succeed ends its serve loop.
		return nil, err
	}
	return srv, nil
}

func (f *filesystem) fsOptions() *fs.Options {
	entryTTL, attrTTL := f.opt.entryTTL(), f.opt.attrTTL()
	flags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV)
	if f.opt.ReadOnly {
		flags |= syscall.MS_RDONLY
	}
	o := &fs.Options{
		EntryTimeout:    &entryTTL,
		AttrTimeout:     &attrTTL,
		NegativeTimeout: &attrTTL,
		NullPermissions: true,
		RootStableAttr:  &fs.StableAttr{Ino: client.RootIno, Mode: syscall.S_IFDIR},
		MountOptions: fuse.MountOptions{
			AllowOther: true,
			// The kernel enforces POSIX permissions (owner.go).
			Options:          []string{"default_permissions"},
			FsName:           "cellfleet:" + f.opt.Volume,
			Name:             FSType,
			MaxWrite:         f.opt.MaxWrite,
			MaxReadAhead:     f.opt.MaxReadAhead,
			MaxBackground:    maxBackground,
			DirectMount:      true,
			DirectMountFlags: flags,
			Debug:            f.opt.Debug,
		},
	}
	if f.opt.Debug {
		o.MountOptions.Logger = log.New(slogWriter{f.log}, "", 0)
	}
	return o
}

// Target is the mount point.
func (m *Mount) Target() string { return m.target }

// FencingEpoch is the epoch this mount opened (0: it fences nothing, see
// fence.go).
func (m *Mount) FencingEpoch() uint64 { return m.fsys.cl.Epoch() }

// Fenced is closed once a newer single-writer mount of the volume fenced
// this one: from then on every request answers EIO.
func (m *Mount) Fenced() <-chan struct{} { return m.fsys.cl.Fenced() }

// Done is closed when the kernel connection ended (unmounted or aborted).
func (m *Mount) Done() <-chan struct{} { return m.done }

func (m *Mount) finish() {
	m.once.Do(func() {
		m.fsys.batch.close()
		m.fsys.cl.Close()
		m.fsys.log.Info("volume unmounted")
		close(m.done)
	})
}

// Unmount detaches the mount. A busy mount is detached lazily: it disappears
// from the tree at once and is served until its last open file closes.
func (m *Mount) Unmount(ctx context.Context) error {
	err := unix.Unmount(m.target, 0)
	if errors.Is(err, syscall.EBUSY) {
		m.fsys.log.Warn("mount busy, detaching lazily")
		err = unix.Unmount(m.target, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("unmount %s: %w", m.target, err)
	}
	if errors.Is(err, syscall.EINVAL) {
		// Not mounted any more: the connection is gone or going.
		m.fsys.log.Warn("target was no longer mounted")
	}
	select {
	case <-m.done:
	case <-ctx.Done():
		// Detached but still busy; finish() runs when it drains.
	}
	return nil
}

// slogWriter sends go-fuse's debug log lines to slog.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Debug(string(p))
	return len(p), nil
}
