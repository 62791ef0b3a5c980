package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"slices"
)

// Digest returns the applied index and a hash of the whole replicated state
// at that index: namespace, attributes, xattrs, file contents, the fencing
// epoch and the exactly-once table. Replicas at the same applied index must
// have equal digests; a difference is divergence.
func (f *FSM) Digest() (uint64, string, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h := sha256.New()
	u := func(v uint64) { _ = binary.Write(h, binary.BigEndian, v) }
	b := func(p []byte) { u(uint64(len(p))); h.Write(p) }
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
			fh, err := f.files.openRead(ino)
			if err != nil {
				return 0, "", err
			}
			var k int64
			if fh != nil {
				k, err = io.Copy(h, io.LimitReader(fh, int64(a.Size)))
				fh.Close()
				if err != nil {
					return 0, "", err
				}
			}
			_, _ = io.CopyN(h, zeroReader{}, int64(a.Size)-k)
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
	return f.st.Applied, hex.EncodeToString(h.Sum(nil)), nil
}
