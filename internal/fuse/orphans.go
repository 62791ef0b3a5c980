package fuse

// Open-but-unlinked files. POSIX keeps a file alive while a descriptor is
// open after its last name is gone; the engine frees an inode with its last
// name. So when a name of a file this mount holds open is about to disappear
// (unlink, or a rename over it), the mount first gives the file a name in a
// hidden directory at the volume's root, and removes that name when the last
// handle closes. The kernel sees nlink minus those hidden names (0 for a
// deleted file), as on a local filesystem. O_TMPFILE files are born there.
//
// Orphan names start with the mount's owner key (the node), so a mount that
// follows a crashed one on the same node removes the leftovers, never those
// of a mount on another node. Another mount of a shared volume deleting a
// file this one holds open frees it: reads then fail (docs/fuse.md).

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// orphanDir is the hidden directory at the volume's root.
const orphanDir = ".cellfleet-orphans"

type orphans struct {
	cl  *client.Client
	key string

	mu     sync.Mutex
	gone   *sync.Cond          // signalled when a removal ends
	dirIno uint64              // 0 until known
	open   map[uint64]int      // open handles per inode
	names  map[uint64][]string // hidden names held per inode
	dying  map[uint64]int      // removals of a name of an unopened inode in flight
	// removed remembers recent removals of names of unopened inodes: an
	// OPEN the kernel resolved just before such a removal can arrive after
	// it, when the inode may be gone.
	removed map[uint64]time.Time
	seq     uint64
	// rootChanged is told when the hidden directory is made in the root
	// (the root's remembered attributes are no longer exact).
	rootChanged func()
}

// removedMemory is how long a removal makes later opens check the inode.
const removedMemory = 10 * time.Second

func newOrphans(cl *client.Client, key string) *orphans {
	o := &orphans{cl: cl, key: key, open: map[uint64]int{}, names: map[uint64][]string{}, dying: map[uint64]int{}, removed: map[uint64]time.Time{}}
	o.gone = sync.NewCond(&o.mu)
	return o
}

// links is how many of ino's links are hidden names.
func (o *orphans) links(ino uint64) uint32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return uint32(len(o.names[ino]))
}

// opened registers an open handle. An open that raced with the removal of a
// name of the same inode waits for it and reports raced: the caller must
// check that the inode still exists.
func (o *orphans) opened(ino uint64) (raced bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.dying[ino] > 0 {
		raced = true
		o.gone.Wait()
	}
	if _, ok := o.removed[ino]; ok {
		raced = true
	}
	o.open[ino]++
	return raced
}

// closed drops one open handle and, with the last, the hidden names (unless
// a removal is in flight: its end does it).
func (o *orphans) closed(ino uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.open[ino]--; o.open[ino] > 0 {
		return
	}
	delete(o.open, ino)
	o.release(ino)
}

// release removes ino's hidden names when nothing holds it open and no
// removal of one of its names is in flight. Callers hold o.mu; it is
// released during the engine calls.
func (o *orphans) release(ino uint64) {
	names := o.names[ino]
	if len(names) == 0 || o.open[ino] > 0 || o.dying[ino] > 0 {
		return
	}
	delete(o.names, ino)
	// An OPEN the kernel resolved before the file lost its last visible
	// name may still arrive: it waits for, then checks, this removal.
	o.dying[ino]++
	dir := o.dirIno
	o.mu.Unlock()
	for _, name := range names {
		// A failure leaves a hidden name that the next mount on this
		// node removes.
		_ = o.cl.Unlink(opCtx(), dir, name)
	}
	o.mu.Lock()
	o.ended(ino)
}

// ended closes a removal. Callers hold o.mu.
func (o *orphans) ended(ino uint64) {
	if o.dying[ino]--; o.dying[ino] <= 0 {
		delete(o.dying, ino)
	}
	o.remember(ino)
	o.gone.Broadcast()
}

// dir returns the hidden directory's inode, creating it when asked.
// Callers hold o.mu.
func (o *orphans) dir(create bool) (uint64, error) {
	if o.dirIno != 0 {
		return o.dirIno, nil
	}
	a, err := o.cl.Lookup(opCtx(), client.RootIno, orphanDir)
	if errors.Is(err, syscall.ENOENT) && create {
		a, err = o.cl.Mkdir(opCtx(), client.RootIno, orphanDir, 0o700, 0, 0)
		if o.rootChanged != nil {
			o.rootChanged()
		}
		if errors.Is(err, syscall.EEXIST) {
			a, err = o.cl.Lookup(opCtx(), client.RootIno, orphanDir)
		}
	}
	if err != nil {
		return 0, err
	}
	o.dirIno = a.Ino
	return o.dirIno, nil
}

// newName returns a fresh hidden name for ino. Callers hold o.mu.
func (o *orphans) newName(ino uint64) string {
	o.seq++
	return fmt.Sprintf("%s.%d.%d", o.key, ino, o.seq)
}

// keep prepares the removal of ino's visible name parent/name: if this mount
// holds ino open, ino first gets a hidden name (by renaming the visible one
// there when rename is set, which completes the removal). Until the caller
// calls done, after its own removal, opens of ino wait and the hidden names
// stay.
func (o *orphans) keep(ino, parent uint64, name string, rename bool) (kept bool, done func(), err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dying[ino]++
	done = func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.ended(ino)
		o.release(ino)
	}
	if o.open[ino] == 0 {
		return false, done, nil
	}
	kept, err = o.hide(ino, parent, name, rename)
	return kept, done, err
}

// remember records a removal. Callers hold o.mu.
func (o *orphans) remember(ino uint64) {
	now := time.Now()
	if len(o.removed) > 1024 {
		for k, at := range o.removed {
			if now.Sub(at) > removedMemory {
				delete(o.removed, k)
			}
		}
	}
	o.removed[ino] = now
}

// hide gives ino a hidden name. Callers hold o.mu.
func (o *orphans) hide(ino, parent uint64, name string, rename bool) (bool, error) {
	dir, err := o.dir(true)
	if err != nil {
		return false, err
	}
	hidden := o.newName(ino)
	if rename {
		err = o.cl.Rename(opCtx(), parent, name, dir, hidden, client.RenameNoReplace)
	} else {
		_, err = o.cl.Link(opCtx(), ino, dir, hidden)
	}
	if err != nil {
		return false, err
	}
	o.names[ino] = append(o.names[ino], hidden)
	return true, nil
}

// tmpfile creates a nameless file (O_TMPFILE): it lives under a hidden name
// until linked into place and closed.
func (o *orphans) tmpfile(mode, uid, gid uint32) (client.Attr, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	dir, err := o.dir(true)
	if err != nil {
		return client.Attr{}, err
	}
	o.seq++
	hidden := fmt.Sprintf("%s.tmp.%d", o.key, o.seq)
	a, err := o.cl.Create(opCtx(), dir, hidden, mode, uid, gid)
	if err != nil {
		return a, err
	}
	o.names[a.Ino] = append(o.names[a.Ino], hidden)
	o.open[a.Ino]++
	return a, nil
}

// sweep removes the hidden names a previous mount of this owner left.
func (o *orphans) sweep() error {
	o.mu.Lock()
	dir, err := o.dir(false)
	o.mu.Unlock()
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	prefix := o.key + "."
	for off := uint64(0); ; {
		ents, err := o.cl.Readdir(opCtx(), dir, off, 1024)
		if err != nil {
			return err
		}
		if len(ents) == 0 {
			return nil
		}
		removed := uint64(0)
		for _, e := range ents {
			if !strings.HasPrefix(e.Name, prefix) {
				continue
			}
			if err := o.cl.Unlink(opCtx(), dir, e.Name); err != nil && !errors.Is(err, syscall.ENOENT) {
				return err
			}
			removed++
		}
		off += uint64(len(ents)) - removed
	}
}
