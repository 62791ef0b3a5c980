package fsm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// fileCache keeps backing files of recently written inodes open. It is
// changed only under the FSM's write lock; queries open their own handles.
type fileCache struct {
	dir  string
	open map[uint64]*os.File
}

const maxOpenFiles = 256

func newFileCache(dir string) *fileCache {
	return &fileCache{dir: dir, open: map[uint64]*os.File{}}
}

func (c *fileCache) path(ino uint64) string {
	return filepath.Join(c.dir, strconv.FormatUint(ino, 16))
}

// get returns ino's backing file, making it on first use: a regular file
// has no backing file until something writes, truncates or allocates it
// (a missing one reads as empty), so creating a file costs no backing-file
// creation on any replica. Inode numbers are never reused and the tree is
// rebuilt at start, so a name made here is never a stale one.
func (c *fileCache) get(ino uint64) (*os.File, error) {
	if fh := c.open[ino]; fh != nil {
		return fh, nil
	}
	fh, err := os.OpenFile(c.path(ino), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open backing file for inode %d: %w", ino, err)
	}
	c.put(ino, fh)
	return fh, nil
}

// openRead opens ino's backing file for reading; a file never written has
// none and reads as empty (nil, nil).
func (c *fileCache) openRead(ino uint64) (*os.File, error) {
	fh, err := os.Open(c.path(ino))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return fh, err
}

func (c *fileCache) put(ino uint64, fh *os.File) {
	if len(c.open) >= maxOpenFiles {
		for k, old := range c.open { // any victim will do
			old.Close()
			delete(c.open, k)
			break
		}
	}
	c.open[ino] = fh
}

// forget closes ino's cached handle, if any (its name is about to change).
func (c *fileCache) forget(ino uint64) {
	if fh := c.open[ino]; fh != nil {
		fh.Close()
		delete(c.open, ino)
	}
}

func (c *fileCache) remove(ino uint64) error {
	if fh := c.open[ino]; fh != nil {
		fh.Close()
		delete(c.open, ino)
	}
	if err := os.Remove(c.path(ino)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove backing file for inode %d: %w", ino, err)
	}
	return nil
}

func (c *fileCache) closeAll() {
	for k, fh := range c.open {
		fh.Close()
		delete(c.open, k)
	}
}
