package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/cellfleet/cellfleet/internal/replica/chunkstore"
)

// Digest returns the applied index and a hash of the whole replicated state
// at that index: namespace, attributes, xattrs, file contents, the fencing
// epoch and the exactly-once table. Replicas at the same applied index must
// have equal digests; a difference is divergence.
//
// Reading every byte of a volume takes about a second per GiB, so the
// contents are not hashed under the state machine's lock (which would hold
// off every apply for that long): under the read lock the metadata is
// encoded and the chunk store captured, as a checkpoint captures (no system
// call per chunk; a chunk the capture names is copied on its next write);
// the files are then hashed from the capture while applies continue. The
// bytes hashed, in order, are the same as hashing the live state under the
// lock.
func (f *FSM) Digest() (uint64, string, error) {
	c, err := f.captureForDigest()
	if err != nil {
		return 0, "", err
	}
	defer f.releaseDigest(c)
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for _, p := range c.parts {
		h.Write(p.meta)
		if !p.file {
			continue
		}
		for off := uint64(0); off < p.size; {
			k := min(uint64(len(buf)), p.size-off)
			if err := c.capture.ReadAt(p.ino, buf[:k], off); err != nil {
				return 0, "", fmt.Errorf("digest: read inode %d as captured: %w", p.ino, err)
			}
			h.Write(buf[:k])
			off += k
		}
	}
	return c.applied, hex.EncodeToString(h.Sum(nil)), nil
}

// digestPart is one stretch of the digest's input: encoded metadata, then,
// for a regular file, its captured contents (size bytes, holes as zeros).
type digestPart struct {
	meta []byte
	ino  uint64
	file bool
	size uint64
}

type digestCapture struct {
	applied uint64
	capture *chunkstore.Capture
	parts   []digestPart
}

func (f *FSM) releaseDigest(c *digestCapture) {
	c.capture.Release()
	if err := f.store.Collect(); err != nil {
		f.log.Warn("collecting the chunk store's unreferenced chunks failed", "error", err)
	}
}

// captureForDigest encodes the metadata and captures the chunk store under
// the read lock, so applies wait only for that.
func (f *FSM) captureForDigest() (*digestCapture, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := &digestCapture{applied: f.st.Applied}
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
			c.parts = append(c.parts, digestPart{meta: cut(), ino: ino, file: true, size: a.Size})
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
	c.capture = f.store.Capture(f.st.Applied)
	return c, nil
}
