package powercut

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FS is one mounted power-cut filesystem: mountpoint shows backing, and
// Cut loses everything not synced.
type FS struct {
	backing, mountpoint string

	mu  sync.Mutex // guards m and every record in it
	m   *model
	srv *fuse.Server

	gate gate // Freeze and Thaw (freeze.go)
}

// Mount mounts a power-cut view of backing (an existing directory, taken
// as fully synced) at mountpoint (an existing empty directory).
func Mount(backing, mountpoint string) (*FS, error) {
	p := &FS{backing: backing, mountpoint: mountpoint}
	if err := p.mount(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *FS) mount() error {
	m, err := scan(p.backing)
	if err != nil {
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p.backing, &st); err != nil {
		return fmt.Errorf("powercut: backing directory: %w", err)
	}
	lroot := &fs.LoopbackRoot{Path: p.backing, Dev: st.Dev}
	root := &node{LoopbackNode: &fs.LoopbackNode{RootData: lroot}, p: p}
	lroot.RootNode = root
	p.mu.Lock()
	p.m = m
	p.mu.Unlock()
	// Short kernel caches: a test that reads back right after a cut sees
	// the remounted tree, not the old one's attributes.
	sec := time.Second
	srv, err := fs.Mount(p.mountpoint, root, &fs.Options{
		EntryTimeout: &sec, AttrTimeout: &sec,
		MountOptions: fuse.MountOptions{FsName: "powercut", Name: "powercut", DirectMount: true, MaxBackground: 64},
	})
	if err != nil {
		return fmt.Errorf("powercut: mount %s: %w", p.mountpoint, err)
	}
	p.srv = srv
	return nil
}

// wrap turns a loopback handle, opened by the backing path path, into one
// whose writes the model sees. oldSize is the size before an O_TRUNC open,
// whose bytes are then unsynced.
func (p *FS) wrap(fh fs.FileHandle, path string, flags uint32, oldSize int64) (*file, syscall.Errno) {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return nil, syscall.EIO
	}
	fd, _ := lf.PassthroughFd() // the descriptor, not FUSE passthrough: see file
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		lf.Release(context.Background())
		return nil, fs.ToErrno(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.m.live(st.Ino, st.Mode)
	if err != nil {
		lf.Release(context.Background())
		return nil, syscall.EIO
	}
	if flags&syscall.O_TRUNC != 0 && r.kind == kindFile {
		r.markPages(0, oldSize)
	}
	return &file{lf: lf, fd: fd, rec: r, p: p, path: path}, 0
}

func (p *FS) syncFile(f *file) syscall.Errno {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := f.rec.syncFile(f.fd); err != nil {
		slog.Error("powercut: fsync", "err", err)
		return syscall.EIO
	}
	return 0
}

func (p *FS) syncDir(dir string) syscall.Errno {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fs.ToErrno(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.m.live(st.Ino, st.Mode)
	if err == nil {
		err = p.m.syncDir(r, dir)
	}
	if err != nil {
		slog.Error("powercut: fsync directory", "err", err)
		return syscall.EIO
	}
	return 0
}

// Cut simulates a power cut: it unmounts (every process using the mount
// must be gone: kill -9 them first), rewrites the backing directory to hold
// only what was synced, and mounts it again. It reports what was lost.
func (p *FS) Cut() (Lost, error) {
	if err := p.unmount(); err != nil {
		return Lost{}, err
	}
	p.mu.Lock()
	lost := p.m.lost()
	err := p.m.materialize(p.backing)
	p.mu.Unlock()
	if err != nil {
		return lost, err
	}
	return lost, p.mount()
}

// Close unmounts, keeping the backing directory as it is (synced or not).
// If the mount stays busy it is detached lazily, so a failed test leaves no
// mount behind, and the error is returned.
func (p *FS) Close() error {
	err := p.unmount()
	if err != nil && p.srv != nil {
		_ = unix.Unmount(p.mountpoint, unix.MNT_DETACH)
		p.srv.Wait()
		p.srv = nil
	}
	return err
}

// unmount waits out EBUSY for a bounded time: the kernel releases a killed
// process's files asynchronously.
func (p *FS) unmount() error {
	if p.srv == nil {
		return nil
	}
	// An operation blocked on a freeze would keep the mount busy forever.
	p.Thaw()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := p.srv.Unmount()
		if err == nil {
			p.srv.Wait()
			p.srv = nil
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("powercut: unmount %s: %w", p.mountpoint, err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a deadline-bounded wait
	}
}

// Mountpoint is where the filesystem is mounted.
func (p *FS) Mountpoint() string { return p.mountpoint }
