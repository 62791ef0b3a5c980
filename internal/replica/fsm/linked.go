package fsm

// Linked checkpoints (docs/journal-format.md, "Checkpoints", format 2).
//
// A streamed checkpoint (format 1, checkpoint.go) writes every backing
// file's bytes into raft's state file: each checkpoint cost a full write of
// the volume's data, every J/2 of journal, on every replica (the largest
// single cost of the 1 MiB write path, docs/performance.md). The capture
// already holds a hard link to each backing file, and copy-on-write
// (capture.go) keeps a linked file unchanged. So when the store gives the
// checkpoint a directory of its own (FilesSink), Persist links the captured
// files there, fdatasyncs them and writes only a manifest to raft's state
// file:
//
//	magic    8 bytes  "CFCKPT\x00\x02"
//	metaLen  uint32   big endian
//	meta     metaLen  gob-encoded state (as format 1)
//	files    repeated: tag 0x02, ino uint64, size uint64, CRC-32C of the
//	         file's size bytes (a sparse tail read as zeros), uint32
//	end      tag 0x00
//	sum      32 bytes SHA-256 of every byte before it
//
// The data is written once (the backing file, by the apply) and only
// flushed by the checkpoint. A file linked by the previous checkpoint whose
// inode and size are still the ones linked now was not changed
// (copy-on-write gives a changed file a new inode while a checkpoint holds
// the old one; a write past its end, made in place, changes its size), so
// its checksum is reused: what a checkpoint reads is what changed since the
// last one.
//
// Opening a linked checkpoint (ExpandCheckpoint) yields the format 1
// stream, built from the linked files, whose per-file checksums are
// verified while it is read: restores and transfers to followers are
// unchanged, and a damaged linked file fails the read like a damaged
// format 1 stream.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/durable"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

var linkedMagic = [8]byte{'C', 'F', 'C', 'K', 'P', 'T', 0, 2}

const tagLinked = 2

// linkedEntry is a manifest entry's size: tag, inode, size, CRC-32C.
const linkedEntry = 1 + 8 + 8 + 4

// castagnoli checksums linked files: CRC-32C runs at about 11 GB/s on
// this project's machines against SHA-256's 0.5 (the checksum of changed
// files was 8 % of the 1 MiB write path with SHA-256), and a checksum here
// detects damage at rest, not forgery; the manifest itself ends in a
// SHA-256 and raft's store checks its CRC-64.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxLinkedFiles bounds the entries a manifest may name when it is parsed.
const maxLinkedFiles = 1 << 24

// FilesSink is a snapshot sink that keeps a directory of files beside the
// checkpoint (removed with it). FilesDir creates the directory durably.
type FilesSink interface {
	raft.SnapshotSink
	FilesDir() (string, error)
}

// linkedFile is what the previous linked checkpoint recorded of a file:
// the backing inode it linked and that inode's checksum at size.
type linkedFile struct {
	dev, ino uint64
	size     uint64
	sum      uint32
}

// persistLinked links the captured files into the sink's directory and
// writes the manifest. linked is false when the files could not be linked
// (another file system); nothing was written to the sink then.
func (s *snapshot) persistLinked(sink FilesSink, prev map[uint64]linkedFile) (n int64, linked bool, err error) {
	dir, err := sink.FilesDir()
	if err != nil {
		return 0, false, fmt.Errorf("checkpoint files directory: %w", err)
	}
	next := make(map[uint64]linkedFile, len(s.files))
	for _, ino := range s.files {
		name := strconv.FormatUint(ino, 16)
		dst := filepath.Join(dir, name)
		if err := os.Link(filepath.Join(s.dir, name), dst); err != nil {
			if errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EMLINK) {
				// Stream instead; links left here would make every
				// later write of those files copy them.
				if rerr := os.RemoveAll(dir); rerr != nil {
					return 0, true, fmt.Errorf("remove the unused checkpoint files directory: %w", rerr)
				}
				return 0, false, nil
			}
			return 0, true, fmt.Errorf("link the capture of inode %d: %w", ino, err)
		}
		lf, err := syncAndSum(dst, s.sizes[ino], prev[ino], s.inOrder[ino])
		if err != nil {
			return 0, true, fmt.Errorf("checkpoint file of inode %d: %w", ino, err)
		}
		next[ino] = lf
	}
	if err := durable.SyncDir(dir); err != nil {
		return 0, true, fmt.Errorf("checkpoint files directory: %w", err)
	}
	n, err = s.writeManifest(sink, next)
	if err != nil {
		return n, true, err
	}
	s.linked = next
	return n, true, nil
}

// syncAndSum makes a linked file durable (the tree is never synced) and
// returns its checksum, reusing prev's when prev linked the same inode at
// the same size (that inode has not changed since), else reading the bytes
// past known, the checksum the apply kept of the file's first bytes
// (seqsum.go; none for a file not written in order).
func syncAndSum(path string, size uint64, prev linkedFile, known seqPrefix) (linkedFile, error) {
	fh, err := os.Open(path)
	if err != nil {
		return linkedFile{}, err
	}
	defer fh.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fh.Fd()), &st); err != nil {
		return linkedFile{}, fmt.Errorf("stat: %w", err)
	}
	lf := linkedFile{dev: uint64(st.Dev), ino: st.Ino, size: size}
	if prev.ino == lf.ino && prev.dev == lf.dev && prev.size == size {
		lf.sum = prev.sum
		return lf, nil
	}
	if err := unix.Fdatasync(int(fh.Fd())); err != nil {
		return linkedFile{}, fmt.Errorf("fdatasync: %w", err)
	}
	if known.n == size {
		lf.sum = known.crc
		return lf, nil
	}
	if _, err := fh.Seek(int64(known.n), io.SeekStart); err != nil {
		return linkedFile{}, fmt.Errorf("checksum: %w", err)
	}
	h := crc32.New(castagnoli)
	if err := copySized(h, fh, size-known.n); err != nil {
		return linkedFile{}, fmt.Errorf("checksum: %w", err)
	}
	lf.sum = crc32Combine(known.crc, h.Sum32(), size-known.n)
	return lf, nil
}

// copySized writes exactly size bytes of r, zero-filling past its end.
func copySized(w io.Writer, r io.Reader, size uint64) error {
	k, err := io.Copy(w, io.LimitReader(r, int64(size)))
	if err != nil {
		return err
	}
	_, err = io.CopyN(w, zeroReader{}, int64(size)-k)
	return err
}

func (s *snapshot) writeManifest(out io.Writer, files map[uint64]linkedFile) (int64, error) {
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(out, h)}
	var hdr [4]byte
	cw.Write(linkedMagic[:])
	binary.BigEndian.PutUint32(hdr[:], uint32(len(s.meta)))
	cw.Write(hdr[:])
	cw.Write(s.meta)
	var ent [linkedEntry]byte
	for _, ino := range s.files {
		lf := files[ino]
		ent[0] = tagLinked
		binary.BigEndian.PutUint64(ent[1:9], ino)
		binary.BigEndian.PutUint64(ent[9:17], lf.size)
		binary.BigEndian.PutUint32(ent[17:21], lf.sum)
		cw.Write(ent[:])
	}
	cw.Write([]byte{tagEnd})
	if cw.err != nil {
		return cw.n, cw.err
	}
	k, err := out.Write(h.Sum(nil))
	return cw.n + int64(k), err
}

// ExpandCheckpoint turns a stored checkpoint state into the stream Restore
// reads. A linked checkpoint's manifest (format 2) is expanded from the
// files in dir into the format 1 stream of size bytes, each file checked
// against its checksum as it is read; linked is false when state is not a
// manifest (it is the stream itself; nothing of it was consumed).
func ExpandCheckpoint(state *bufio.Reader, dir string) (stream io.ReadCloser, size int64, linked bool, err error) {
	magic, err := state.Peek(len(linkedMagic))
	if err != nil || !bytes.Equal(magic, linkedMagic[:]) {
		return nil, 0, false, nil
	}
	s, err := readManifest(state)
	if err != nil {
		return nil, 0, true, err
	}
	s.dir = dir
	size = int64(len(checkpointMagic)) + 4 + int64(len(s.meta)) + 1 + sha256.Size
	for _, ino := range s.files {
		size += 17 + int64(s.sizes[ino])
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := s.write(pw)
		pw.CloseWithError(err)
	}()
	return pr, size, true, nil
}

func readManifest(r io.Reader) (*snapshot, error) {
	h := sha256.New()
	tr := io.TeeReader(r, h)
	var hdr [linkedEntry]byte
	if _, err := io.ReadFull(tr, hdr[:12]); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCheckpointCorrupt, err)
	}
	metaLen := binary.BigEndian.Uint32(hdr[8:12])
	if metaLen > maxMeta {
		return nil, fmt.Errorf("%w: metadata length %d", ErrCheckpointCorrupt, metaLen)
	}
	s := &snapshot{meta: make([]byte, metaLen), sizes: map[uint64]uint64{}, sums: map[uint64]uint32{}}
	if _, err := io.ReadFull(tr, s.meta); err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrCheckpointCorrupt, err)
	}
	for {
		if _, err := io.ReadFull(tr, hdr[:1]); err != nil {
			return nil, fmt.Errorf("%w: manifest: %v", ErrCheckpointCorrupt, err)
		}
		if hdr[0] == tagEnd {
			break
		}
		if hdr[0] != tagLinked || len(s.files) >= maxLinkedFiles {
			return nil, fmt.Errorf("%w: manifest entry tag %d after %d files", ErrCheckpointCorrupt, hdr[0], len(s.files))
		}
		if _, err := io.ReadFull(tr, hdr[1:]); err != nil {
			return nil, fmt.Errorf("%w: manifest: %v", ErrCheckpointCorrupt, err)
		}
		ino := binary.BigEndian.Uint64(hdr[1:9])
		size := binary.BigEndian.Uint64(hdr[9:17])
		if size > wire.MaxFileSize {
			return nil, fmt.Errorf("%w: file size %d", ErrCheckpointCorrupt, size)
		}
		if _, dup := s.sizes[ino]; dup {
			return nil, fmt.Errorf("%w: inode %d named twice", ErrCheckpointCorrupt, ino)
		}
		s.files = append(s.files, ino)
		s.sizes[ino] = size
		s.sums[ino] = binary.BigEndian.Uint32(hdr[17:21])
	}
	want := h.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, want) {
		return nil, fmt.Errorf("%w: manifest checksum mismatch", ErrCheckpointCorrupt)
	}
	return s, nil
}

// verifiedCopy is copyExactly for a linked file: the bytes are checked
// against the manifest's checksum before the stream goes on.
func verifiedCopy(w io.Writer, path string, size uint64, want uint32, ino uint64) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: linked file of inode %d: %v", ErrCheckpointCorrupt, ino, err)
	}
	defer fh.Close()
	h := crc32.New(castagnoli)
	if err := copySized(io.MultiWriter(w, h), fh, size); err != nil {
		return err
	}
	if h.Sum32() != want {
		return fmt.Errorf("%w: linked file of inode %d: checksum mismatch", ErrCheckpointCorrupt, ino)
	}
	return nil
}

func (f *FSM) lastLinked() map[uint64]linkedFile {
	f.linkedMu.Lock()
	defer f.linkedMu.Unlock()
	return f.linked
}

func (f *FSM) setLastLinked(m map[uint64]linkedFile) {
	f.linkedMu.Lock()
	defer f.linkedMu.Unlock()
	f.linked = m
}
