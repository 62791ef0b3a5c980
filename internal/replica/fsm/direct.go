package fsm

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/directio"
)

// directMin is the smallest aligned run a write sends around the page cache
// (internal/directio says why). Smaller writes, and the unaligned head and
// tail of a larger one, go through the page cache: for them the copy costs
// less than the extra device request, and a 4 KiB write that fsync follows
// gains nothing from skipping it.
const directMin = 64 << 10

// writeAt writes data at off into ino's backing file fh (the cache's
// handle). The block-aligned middle of a large write goes through an
// O_DIRECT descriptor of the same file; the kernel keeps the two coherent
// (a direct write first writes back and drops cached pages of its range), so
// reads through any handle see every write in order.
func (c *fileCache) writeAt(ino uint64, fh *os.File, data []byte, off int64) error {
	end := off + int64(len(data))
	a, b := directio.RoundUp(off), directio.RoundDown(end)
	d := c.directFor(ino, b-a)
	if d == nil {
		_, err := fh.WriteAt(data, off)
		return err
	}
	if a > off {
		if _, err := fh.WriteAt(data[:a-off], off); err != nil {
			return err
		}
	}
	if _, err := directio.WriteAt(d, a, nil, data[a-off:b-off]); err != nil {
		if !errors.Is(err, unix.EINVAL) {
			return err
		}
		// The filesystem took the descriptor but not the write: stop trying.
		c.noDirect = true
		c.forgetDirect()
		if _, err := fh.WriteAt(data[a-off:b-off], a); err != nil {
			return err
		}
	}
	if end > b {
		if _, err := fh.WriteAt(data[b-off:], b); err != nil {
			return err
		}
	}
	return nil
}

// directFor returns an O_DIRECT descriptor of ino's backing file for an
// aligned run of n bytes, or nil when the run is small or the filesystem
// refuses O_DIRECT.
func (c *fileCache) directFor(ino uint64, n int64) *os.File {
	if n < directMin || c.noDirect {
		return nil
	}
	if d := c.direct[ino]; d != nil {
		return d
	}
	d, err := directio.Open(c.path(ino), 0)
	if err != nil {
		c.noDirect = true
		return nil
	}
	c.direct[ino] = d
	return d
}

func (c *fileCache) forgetDirect() {
	for k, d := range c.direct {
		d.Close()
		delete(c.direct, k)
	}
}
