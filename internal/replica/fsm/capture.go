package fsm

// Checkpoint capture by hard link, copy-on-write at the next write.
//
// raft runs Snapshot on the apply goroutine, so whatever the capture costs
// is an apply stall. Copying every backing file made that stall grow with
// the volume (3.2 s for 1 GiB, docs/performance.md). Instead the capture
// hard-links each backing file into its capture directory: one link per
// file, no data copied. A backing file that is linked (its link count above
// one) is never changed in place: the next write, truncate or allocation
// of it first replaces the tree's name with a private copy (a reflink
// where the file system has them, else a data copy), so the capture keeps
// the bytes it linked. Removing a file only drops the tree's name. Once
// the capture is released its links go and the link count is one again.
// (A write past a block-aligned end changes none of the linked bytes and
// needs no copy: writable.)
//
// The copy a write may have to make is of that one file, paid once per
// capture; the capture itself no longer depends on the volume's size.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// captureFile links the backing file at from into a capture as to; a file
// never written becomes an empty capture file.
func captureFile(from, to string) error {
	err := os.Link(from, to)
	if errors.Is(err, fs.ErrNotExist) {
		return os.WriteFile(to, nil, 0o600)
	}
	return err
}

// writable returns ino's backing file for a change of its bytes from
// offset from on, first giving the tree its own copy when a capture shares
// it (changes that are not writes past the file's end pass 0).
//
// A write at or past the file's end, when the end is on a block boundary,
// needs no copy: a capture reads only the size it recorded, which is at
// most the size now (every change that could shrink a shared file copies
// it first), and such a write changes no byte and rewrites no block below
// the end, so the bytes and the blocks a checkpoint flushed stay as they
// were. An append at an unaligned end would rewrite the block holding the
// captured bytes' tail and still copies. This keeps a file that grows by
// large writes (a log, a stream, a copy) from being copied whole at every
// checkpoint that catches it being written.
func (f *FSM) writable(ino, from uint64) (*os.File, error) {
	fh, err := f.files.get(ino)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fh.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat backing file of inode %d: %w", ino, err)
	}
	if st.Nlink <= 1 {
		return fh, nil
	}
	if from >= uint64(st.Size) && st.Blksize > 0 && st.Size%int64(st.Blksize) == 0 {
		return fh, nil
	}
	if err := f.unshare(ino, fh); err != nil {
		return nil, err
	}
	return f.files.get(ino)
}

// unshare replaces the tree's name for ino with a private copy of src.
func (f *FSM) unshare(ino uint64, src *os.File) error {
	path := f.files.path(ino)
	tmp := path + ".cow"
	dst, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("copy-on-write of inode %d: %w", ino, err)
	}
	if err := cloneOrCopy(dst, src); err != nil {
		dst.Close()
		os.Remove(tmp)
		return fmt.Errorf("copy-on-write of inode %d: %w", ino, err)
	}
	if err := dst.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copy-on-write of inode %d: %w", ino, err)
	}
	f.files.forget(ino)
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("copy-on-write of inode %d: %w", ino, err)
	}
	return nil
}

// cloneOrCopy gives dst src's bytes: a reflink (XFS, btrfs) or a copy.
func cloneOrCopy(dst, src *os.File) error {
	if err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())); err == nil {
		return nil
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(dst, src)
	return err
}
