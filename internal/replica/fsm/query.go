package fsm

import (
	"errors"
	"slices"
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/chunkstore"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// Query answers a read-only operation from the applied state. The caller
// (the coordinator) has already established that the state is current.
func (f *FSM) Query(op *wire.Op) wire.Result {
	if f.Failed() != nil {
		return errno(syscall.EIO)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	switch op.Kind {
	case wire.KindLookup:
		parent, e := f.dir(op.Ino)
		if e != 0 {
			return wire.Result{Errno: e}
		}
		if len(op.Name) > wire.MaxName {
			return errno(syscall.ENAMETOOLONG)
		}
		ino, ok := parent.Children[op.Name]
		if !ok {
			return errno(syscall.ENOENT)
		}
		return wire.Result{Attr: f.st.Inodes[ino].Attr}
	case wire.KindGetattr:
		n := f.st.Inodes[op.Ino]
		if n == nil {
			return errno(syscall.ENOENT)
		}
		return wire.Result{Attr: n.Attr}
	case wire.KindRead:
		return f.read(op)
	case wire.KindReaddir:
		return f.readdir(op)
	case wire.KindReadlink:
		n := f.st.Inodes[op.Ino]
		if n == nil {
			return errno(syscall.ENOENT)
		}
		if n.Attr.Mode&syscall.S_IFMT != syscall.S_IFLNK {
			return errno(syscall.EINVAL)
		}
		return wire.Result{Data: n.Target}
	case wire.KindGetxattr:
		n := f.st.Inodes[op.Ino]
		if n == nil {
			return errno(syscall.ENOENT)
		}
		v, ok := n.Xattrs[op.Name]
		if !ok {
			return errno(syscall.ENODATA)
		}
		return wire.Result{Data: v}
	case wire.KindListxattr:
		n := f.st.Inodes[op.Ino]
		if n == nil {
			return errno(syscall.ENOENT)
		}
		return wire.Result{Names: sortedKeys(n.Xattrs)}
	case wire.KindStatfs:
		return wire.Result{StatFs: wire.StatFs{Capacity: f.limits().Capacity, Used: f.st.Used,
			Inodes: uint64(len(f.st.Inodes))}}
	default:
		return errno(syscall.EINVAL)
	}
}

func (f *FSM) read(op *wire.Op) wire.Result {
	n, e := f.regular(op.Ino)
	if e != 0 {
		return wire.Result{Errno: e}
	}
	if op.Offset >= n.Attr.Size {
		return wire.Result{Attr: n.Attr}
	}
	size := min(op.Size, n.Attr.Size-op.Offset, wire.MaxData)
	// The bytes go straight into the reply frame's pooled buffer
	// (wire.ReadBuffer): the RPC server releases it after sending. The
	// store fills every byte, holes with zeros.
	frame, buf := wire.ReadBuffer(int(size))
	if err := f.store.ReadAt(op.Ino, buf, op.Offset); err != nil {
		wire.PutBuf(frame)
		if errors.Is(err, chunkstore.ErrCorrupt) {
			// Never served: the replica stops, as for a damaged
			// checkpoint (docs/replica-engine.md).
			f.fail(err)
		}
		return errno(syscall.EIO)
	}
	return wire.Result{Attr: n.Attr, Data: buf, N: uint64(len(buf)), Frame: frame}
}

func (f *FSM) readdir(op *wire.Op) wire.Result {
	d, e := f.dir(op.Ino)
	if e != 0 {
		return wire.Result{Errno: e}
	}
	max := min(op.Size, wire.MaxEntries)
	if max == 0 {
		max = wire.MaxEntries
	}
	var out []wire.DirEntry
	for i := op.Offset; i < uint64(len(d.names)) && uint64(len(out)) < max; i++ {
		name := d.names[i]
		ino := d.Children[name]
		out = append(out, wire.DirEntry{Name: name, Ino: ino, Mode: f.st.Inodes[ino].Attr.Mode & syscall.S_IFMT})
	}
	return wire.Result{Entries: out}
}

func sortedKeys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
