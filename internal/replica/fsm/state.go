package fsm

import (
	"slices"
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// inode is one file system object. Exported fields are checkpointed.
type inode struct {
	Attr     wire.Attr
	Parent   uint64            // directories only: the containing directory
	Children map[string]uint64 // directories only
	Target   []byte            // symlinks only
	Xattrs   map[string][]byte
	Orphan   uint64   // session keeping this unlinked inode (KeepOrphan), else 0
	names    []string // sorted keys of Children, rebuilt after restore
}

// session is one client's exactly-once record.
type session struct {
	ID       uint64
	LastUsed uint64 // log index of the last operation, the eviction order
	Floor    uint64 // results below this sequence were acknowledged and dropped
	Results  map[uint64]wire.Result
}

// state is everything a checkpoint captures besides file contents.
type state struct {
	NextIno  uint64
	Used     uint64
	Inodes   map[uint64]*inode
	Sessions map[uint64]*session
	Applied  uint64
	// Fence is the newest fencing epoch issued (fence.go); operations of
	// older epochs are refused.
	Fence uint64
	// Limits are the volume's replicated limits; nil until a limits
	// command applies (DefaultLimits hold meanwhile).
	Limits *Limits
}

func newState(now int64) *state {
	root := &inode{
		Attr: wire.Attr{Ino: wire.RootIno, Mode: syscall.S_IFDIR | 0o755, Nlink: 2,
			Atime: now, Mtime: now, Ctime: now},
		Parent:   wire.RootIno,
		Children: map[string]uint64{},
	}
	return &state{
		NextIno:  wire.RootIno + 1,
		Inodes:   map[uint64]*inode{wire.RootIno: root},
		Sessions: map[uint64]*session{},
	}
}

func (n *inode) isDir() bool { return n.Attr.IsDir() }

func (n *inode) addChild(name string, ino uint64) {
	n.Children[name] = ino
	i, _ := slices.BinarySearch(n.names, name)
	n.names = slices.Insert(n.names, i, name)
}

func (n *inode) removeChild(name string) {
	delete(n.Children, name)
	if i, ok := slices.BinarySearch(n.names, name); ok {
		n.names = slices.Delete(n.names, i, i+1)
	}
}

// rebuildNames restores the sorted name index after a checkpoint restore
// (gob leaves empty maps nil).
func (s *state) rebuildNames() {
	if s.Sessions == nil {
		s.Sessions = map[uint64]*session{}
	}
	for _, ss := range s.Sessions {
		if ss.Results == nil {
			ss.Results = map[uint64]wire.Result{}
		}
	}
	for _, n := range s.Inodes {
		if !n.isDir() {
			continue
		}
		if n.Children == nil {
			n.Children = map[string]uint64{}
		}
		n.names = make([]string, 0, len(n.Children))
		for name := range n.Children {
			n.names = append(n.names, name)
		}
		slices.Sort(n.names)
	}
}

// validName applies Linux's rules for one path component.
func validName(name string) uint32 {
	switch {
	case name == "" || name == "." || name == "..":
		return uint32(syscall.EINVAL)
	case len(name) > wire.MaxName:
		return uint32(syscall.ENAMETOOLONG)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' || name[i] == 0 {
			return uint32(syscall.EINVAL)
		}
	}
	return 0
}

func errno(e syscall.Errno) wire.Result { return wire.Result{Errno: uint32(e)} }
