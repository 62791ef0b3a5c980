package powercut

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// pageSize is the unit in which unsynced file data is tracked.
const pageSize = 4096

// kind is an inode's file type as far as the model cares.
type kind uint8

const (
	kindFile kind = iota + 1
	kindDir
	kindSymlink
)

func kindOf(mode uint32) (kind, error) {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return kindFile, nil
	case syscall.S_IFDIR:
		return kindDir, nil
	case syscall.S_IFLNK:
		return kindSymlink, nil
	}
	return 0, fmt.Errorf("file type %#o is not modelled", mode&syscall.S_IFMT)
}

// record is one inode of the model: what survives a cut, and what does not
// yet. Records are keyed by an id of their own, not by the backing inode
// number, because the backing filesystem reuses a freed inode number while
// a durable directory entry may still name the old inode.
type record struct {
	id   uint64
	kind kind
	perm uint32

	durable []byte            // file: contents at the last sync
	dirty   map[int64]bool    // file: pages written or truncated since
	entries map[string]uint64 // dir: entries at the last directory sync
	renamed bool              // dir: entries changed since that sync
	target  string            // symlink (immutable once made)
}

// model is the durable image of the whole tree plus the map from live
// backing inodes to records. Its methods are called with FS.mu held.
type model struct {
	nextID uint64
	root   uint64
	byID   map[uint64]*record
	byIno  map[uint64]*record
}

// scan makes a model in which everything under dir is durable: the state
// of a disk at mount time.
func scan(dir string) (*model, error) {
	m := &model{byID: map[uint64]*record{}, byIno: map[uint64]*record{}}
	root, err := m.scanInode(dir)
	if err != nil {
		return nil, err
	}
	m.root = root.id
	return m, nil
}

func (m *model) scanInode(p string) (*record, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return nil, fmt.Errorf("scan %s: %w", p, err)
	}
	if r, ok := m.byIno[st.Ino]; ok { // a hard link already seen
		return r, nil
	}
	r, err := m.fresh(st.Ino, st.Mode)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", p, err)
	}
	switch r.kind {
	case kindFile:
		if r.durable, err = os.ReadFile(p); err != nil {
			return nil, fmt.Errorf("scan %s: %w", p, err)
		}
	case kindSymlink:
		if r.target, err = os.Readlink(p); err != nil {
			return nil, fmt.Errorf("scan %s: %w", p, err)
		}
	case kindDir:
		des, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", p, err)
		}
		for _, de := range des {
			c, err := m.scanInode(filepath.Join(p, de.Name()))
			if err != nil {
				return nil, err
			}
			r.entries[de.Name()] = c.id
		}
	}
	return r, nil
}

// fresh records a new inode with nothing durable yet: a file is empty and
// a directory has no entries until they are synced.
func (m *model) fresh(ino uint64, mode uint32) (*record, error) {
	k, err := kindOf(mode)
	if err != nil {
		return nil, err
	}
	m.nextID++
	r := &record{id: m.nextID, kind: k, perm: mode & 0o7777}
	switch k {
	case kindFile:
		r.dirty = map[int64]bool{}
	case kindDir:
		r.entries = map[string]uint64{}
	}
	m.byID[r.id] = r
	m.byIno[ino] = r
	return r, nil
}

// live returns the record of a backing inode, recording it as fresh if the
// model has never seen it.
func (m *model) live(ino uint64, mode uint32) (*record, error) {
	if r, ok := m.byIno[ino]; ok {
		return r, nil
	}
	return m.fresh(ino, mode)
}

// markPages records that bytes [off, end) changed since the last sync.
func (r *record) markPages(off, end int64) {
	for p := off / pageSize; p*pageSize < end; p++ {
		r.dirty[p] = true
	}
}

// syncFile makes the file's current contents (read through a descriptor
// of it, which may be write-only) its durable image, copying only the pages
// changed since the last sync.
func (r *record) syncFile(wfd int) error {
	// Reopening through /proc reaches the same inode even once unlinked.
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", wfd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fsync: reopen for reading: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fsync: stat: %w", err)
	}
	size := st.Size
	if int64(len(r.durable)) > size {
		r.durable = r.durable[:size]
	} else if grow := size - int64(len(r.durable)); grow > 0 {
		r.durable = append(r.durable, make([]byte, grow)...)
	}
	for p := range r.dirty {
		start := p * pageSize
		if start >= size {
			continue
		}
		end := min(start+pageSize, size)
		if _, err := unix.Pread(fd, r.durable[start:end], start); err != nil {
			return fmt.Errorf("fsync: read back page %d: %w", p, err)
		}
	}
	clear(r.dirty)
	return nil
}

// syncDir makes the directory's current entries (read from its backing
// path) its durable entries.
func (m *model) syncDir(r *record, backing string) error {
	des, err := os.ReadDir(backing)
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", backing, err)
	}
	entries := make(map[string]uint64, len(des))
	for _, de := range des {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(backing, de.Name()), &st); err != nil {
			return fmt.Errorf("fsync directory %s: %w", backing, err)
		}
		c, err := m.live(st.Ino, st.Mode)
		if err != nil {
			return fmt.Errorf("fsync directory %s: entry %s: %w", backing, de.Name(), err)
		}
		entries[de.Name()] = c.id
	}
	r.entries = entries
	r.renamed = false
	return nil
}

// Lost counts what a cut dropped.
type Lost struct {
	Pages       int // file pages written or truncated after their file's last sync
	Directories int // directories whose entries changed after their last sync
}

func (m *model) lost() Lost {
	var l Lost
	for _, r := range m.byID {
		l.Pages += len(r.dirty)
		if r.renamed {
			l.Directories++
		}
	}
	return l
}

// materialize empties dir and writes the durable image into it.
func (m *model) materialize(dir string) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cut: %w", err)
	}
	for _, de := range des {
		if err := os.RemoveAll(filepath.Join(dir, de.Name())); err != nil {
			return fmt.Errorf("cut: %w", err)
		}
	}
	made := map[uint64]string{m.root: dir}
	return m.materializeDir(m.byID[m.root], dir, made)
}

func (m *model) materializeDir(d *record, dir string, made map[uint64]string) error {
	for name, id := range d.entries {
		p := filepath.Join(dir, name)
		r := m.byID[id]
		if prev, ok := made[id]; ok {
			if r.kind == kindDir { // a cycle or a second name the durable image cannot hold
				continue
			}
			if err := os.Link(prev, p); err != nil {
				return fmt.Errorf("cut: link %s: %w", p, err)
			}
			continue
		}
		made[id] = p
		var err error
		switch r.kind {
		case kindFile:
			if err = os.WriteFile(p, r.durable, 0o600); err == nil {
				err = os.Chmod(p, fs.FileMode(r.perm&0o777))
			}
		case kindSymlink:
			err = os.Symlink(r.target, p)
		case kindDir:
			if err = os.Mkdir(p, 0o700); err == nil {
				err = m.materializeDir(r, p, made)
			}
			if err == nil {
				err = os.Chmod(p, fs.FileMode(r.perm&0o777))
			}
		}
		if err != nil {
			return fmt.Errorf("cut: %s: %w", p, err)
		}
	}
	return nil
}
