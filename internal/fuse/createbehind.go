package fuse

// Create-behind on single-writer volumes. A create is one commit (two
// fdatasyncs in sequence and four loopback hops), so a program creating
// files one after the other was held to one commit per file. When the mount
// knows the name is absent (names.go) it answers CREATE at once, with an
// inode number it reserved earlier and its own clock's time, both of which
// the engine then uses (wire.ReservedIno), and the commit follows
// (client.CreateBehind): concurrent creates share the journal's fdatasyncs.
//
// Order: every later call of the mount's client waits until the creates sent
// before it are answered, so a write, rename, unlink or lookup of a new file
// reaches the engine after the file exists.
//
// Durability and errors, as on a local file system (and CephFS's
// asynchronous creates): a created name is durable once fsync of the file
// or of its directory returns, or the mount is unmounted. A create the
// engine refuses or whose outcome is uncertain makes that fsync answer EIO
// (once), the kernel forgets the name and the next lookup asks the
// coordinator. docs/fuse.md (Semantics) states it for users.

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// inoReservation is how many inode numbers the mount reserves at a time.
const inoReservation = 1024

// inoPool holds the reserved numbers not yet used.
type inoPool struct {
	mu        sync.Mutex
	next, end uint64
}

// createFailures holds failed creates not yet reported, by the inode of
// the file and of its directory: each fsync of either reports it once.
type createFailures struct {
	mu     sync.Mutex
	failed map[uint64]error
}

// take returns and forgets ino's unreported failure.
func (c *createFailures) take(ino uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.failed[ino]
	delete(c.failed, ino)
	return err
}

// peek returns ino's unreported failure and keeps it for an fsync.
func (c *createFailures) peek(ino uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed[ino]
}

func (c *createFailures) add(dir, ino uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed == nil {
		c.failed = map[uint64]error{}
	}
	c.failed[dir], c.failed[ino] = err, err
}

// takeIno returns a reserved inode number, reserving more when none is left.
func (f *filesystem) takeIno() (uint64, error) {
	p := &f.inos
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == p.end {
		first, err := f.cl.ReserveInos(opCtx(), inoReservation)
		if err != nil {
			return 0, err
		}
		p.next, p.end = first, first+inoReservation
	}
	ino := p.next
	p.next++
	return ino, nil
}

// createBehind makes name in directory n with the commit to follow, when the
// mount may answer first; ok false means the caller must create and wait.
func (n *node) createBehind(name string, mode, uid, gid uint32) (a client.Attr, ok bool, err error) {
	f := n.fsys
	if f.names == nil || f.opt.SyncCreates || !f.names.absent(n.ino(), name) {
		return client.Attr{}, false, nil
	}
	ino, err := f.takeIno()
	if err != nil {
		return client.Attr{}, true, err
	}
	a = client.NewFileAttr(ino, mode, uid, gid, time.Now().UnixNano())
	// The name exists for this mount from now on, before the answer can
	// arrive and say otherwise.
	n.added(name, nil)
	n.entryAddedBehind(a)
	dir := n.ino()
	err = f.cl.CreateBehind(opCtx(), dir, name, a, func(err error) {
		if err != nil {
			n.createFailed(name, a.Ino, err)
		}
	})
	if err != nil {
		// Not sent: undo what the mount believed.
		n.createFailed(name, a.Ino, err)
		return client.Attr{}, true, err
	}
	return a, true, nil
}

// createFailed undoes a create answered before its commit: the directory's
// names and attributes are no longer known, the kernel forgets the name, and
// the next fsync of the file or the directory reports it.
func (n *node) createFailed(name string, ino uint64, err error) {
	f := n.fsys
	dir := n.ino()
	f.names.forget(dir)
	n.dirChanged()
	f.createFailures.add(dir, ino, fmt.Errorf("create %q in directory %d (answered before its commit): %w", name, dir, err))
	f.log.Error("a create answered before its commit failed; the next fsync of the file or its directory reports EIO",
		"dir", dir, "name", name, "ino", ino, "error", err, "uncertain", !isCertainRefusal(err))
	// Not from this goroutine: the kernel takes the directory's lock to drop
	// the entry, which a create waiting for this one's slot may hold.
	go n.NotifyEntry(name)
}

// settleCreates waits for the creates answered before their commit and
// reports the failure of one made as or in ino: once, to an fsync; to a
// close (flush) every time until an fsync has reported it, since a FLUSH
// may come from a descriptor the writing program never used (writeback.go).
func (f *filesystem) settleCreates(op string, ino uint64) syscall.Errno {
	if err := f.cl.Settle(opCtx()); err != nil {
		return f.errno(op, ino, err)
	}
	failed := f.createFailures.take
	if op == opFlush {
		failed = f.createFailures.peek
	}
	if err := failed(ino); err != nil {
		f.log.Warn("reporting a failed create", "op", op, "ino", ino, "error", err)
		return syscall.EIO
	}
	return 0
}
