package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// Digest returns the applied index and a hash of the whole replicated state
// at that index: namespace, attributes, xattrs, file contents, the fencing
// epoch and the exactly-once table. Replicas at the same applied index must
// have equal digests; a difference is divergence.
//
// Reading every byte of a volume takes about a second per GiB, so the
// contents are not hashed under the state machine's lock (which would hold
// off every apply for that long): under the read lock the metadata is
// encoded and each backing file hard-linked into a capture directory, as a
// checkpoint captures (capture.go: a linked file is copied on its next
// write, so the capture keeps the bytes of this index); the files are then
// hashed from the capture while applies continue. The bytes hashed, in
// order, are the same as hashing the live state under the lock.
func (f *FSM) Digest() (uint64, string, error) {
	c, err := f.captureForDigest()
	if err != nil {
		return 0, "", err
	}
	defer os.RemoveAll(c.dir)
	h := sha256.New()
	for _, p := range c.parts {
		h.Write(p.meta)
		if p.file == "" {
			continue
		}
		fh, err := os.Open(p.file)
		if err != nil {
			return 0, "", fmt.Errorf("digest: open the captured file of inode %d: %w", p.ino, err)
		}
		k, err := io.Copy(h, io.LimitReader(fh, int64(p.size)))
		fh.Close()
		if err != nil {
			return 0, "", fmt.Errorf("digest: read the captured file of inode %d: %w", p.ino, err)
		}
		_, _ = io.CopyN(h, zeroReader{}, int64(p.size)-k)
	}
	return c.applied, hex.EncodeToString(h.Sum(nil)), nil
}

// digestPart is one stretch of the digest's input: encoded metadata, then,
// for a regular file, its captured contents padded with zeros to size.
type digestPart struct {
	meta []byte
	ino  uint64
	file string // the captured link; "" when the inode is no regular file
	size uint64
}

type digestCapture struct {
	applied uint64
	dir     string
	parts   []digestPart
}

// captureForDigest encodes the metadata and links the backing files under
// the read lock: cheap (one link per file), so applies wait only for that.
func (f *FSM) captureForDigest() (*digestCapture, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	dir := filepath.Join(f.opt.Dir, "captures", "digest-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("digest: create the capture directory: %w", err)
	}
	c := &digestCapture{applied: f.st.Applied, dir: dir}
	var buf bytes.Buffer
	u := func(v uint64) { _ = binary.Write(&buf, binary.BigEndian, v) }
	b := func(p []byte) { u(uint64(len(p))); buf.Write(p) }
	cut := func() []byte { p := bytes.Clone(buf.Bytes()); buf.Reset(); return p }
	u(f.st.NextIno)
	u(f.st.Used)
	u(f.st.Fence)
	lim := f.limits()
	u(lim.Capacity)
	u(uint64(lim.MaxSessions))
	inos := make([]uint64, 0, len(f.st.Inodes))
	for ino := range f.st.Inodes {
		inos = append(inos, ino)
	}
	slices.Sort(inos)
	for _, ino := range inos {
		n := f.st.Inodes[ino]
		a := n.Attr
		for _, v := range []uint64{a.Ino, uint64(a.Mode), uint64(a.Nlink), uint64(a.UID), uint64(a.GID), uint64(a.Rdev),
			a.Size, uint64(a.Atime), uint64(a.Mtime), uint64(a.Ctime), n.Parent, n.Orphan} {
			u(v)
		}
		b(n.Target)
		for _, name := range n.names {
			b([]byte(name))
			u(n.Children[name])
		}
		for _, k := range sortedKeys(n.Xattrs) {
			b([]byte(k))
			b(n.Xattrs[k])
		}
		if a.IsRegular() {
			link := filepath.Join(dir, strconv.FormatUint(ino, 16))
			if err := captureFile(f.files.path(ino), link); err != nil {
				os.RemoveAll(dir)
				return nil, fmt.Errorf("digest: capture the backing file of inode %d: %w", ino, err)
			}
			c.parts = append(c.parts, digestPart{meta: cut(), ino: ino, file: link, size: a.Size})
		}
	}
	ids := make([]uint64, 0, len(f.st.Sessions))
	for id := range f.st.Sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s := f.st.Sessions[id]
		u(id)
		u(s.LastUsed)
		u(s.Floor)
		u(uint64(len(s.Results)))
	}
	c.parts = append(c.parts, digestPart{meta: cut()})
	return c, nil
}
