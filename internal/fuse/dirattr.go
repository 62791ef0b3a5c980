package fuse

// Directory attributes on single-writer volumes. The kernel drops a
// directory's cached attributes after every entry it creates or removes in
// it and asks GETATTR again before the next permission check, so each file
// a program creates costs a coordinator round trip for its parent's
// attributes besides the create itself. On a volume only this mount
// changes, the mount knows what the engine did to the parent: a create,
// mkdir, mknod, symlink or link sets the parent's mtime and ctime to the
// entry's time (the new inode's ctime, which the engine returns) and a
// mkdir adds one link. Those changes are applied to the remembered
// attributes; any other change to a directory (removals, renames, extended
// attributes, an outcome that is not certain) marks them inexact, and the
// next GETATTR asks the coordinator. docs/performance.md (## FUSE mount)
// records the create rate this buys.

import (
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// exactDirAttr returns the directory's attributes when the mount knows
// them to be the engine's.
func (n *node) exactDirAttr() (client.Attr, bool) {
	if !n.fsys.opt.SingleWriter || n.fsys.opt.ReadOnly {
		return client.Attr{}, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.exact || n.attr.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return client.Attr{}, false
	}
	return n.attr, true
}

// entryAdded applies what the engine did to directory n when it made an
// entry whose new (or, for link, target) inode has attributes child; err
// is the engine's answer.
func (n *node) entryAdded(child client.Attr, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case err == nil:
		n.attr.Mtime, n.attr.Ctime = child.Ctime, child.Ctime
		if child.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			n.attr.Nlink++
		}
	case isCertainRefusal(err):
	default:
		n.exact = false
	}
}

// dirChanged marks n's attributes inexact after a change the mount cannot
// derive.
func (n *node) dirChanged() {
	n.mu.Lock()
	n.exact = false
	n.mu.Unlock()
}
