package wire

import (
	"fmt"
	"syscall"
)

// Kind names an operation. Mutations are proposed through Raft; queries are
// answered by the coordinator after it has verified its authority.
type Kind uint8

// Operation kinds. Values are part of the on-disk journal format: append
// only, never renumber.
const (
	KindInvalid Kind = iota
	KindRegister
	KindCreate
	KindMkdir
	KindMknod
	KindSymlink
	KindLink
	KindUnlink
	KindRmdir
	KindRename
	KindWrite
	KindTruncate
	KindFallocate
	KindSetattr
	KindSetxattr
	KindRemovexattr
	KindLookup
	KindGetattr
	KindRead
	KindReaddir
	KindReadlink
	KindGetxattr
	KindListxattr
	KindStatfs
	KindRelease
	KindFence
	KindReserveInos
	// KindFetchChunk reads chunk Offset of inode Ino as the kept manifest
	// Ino2 of the answering replica's chunk store names it: a follower
	// restoring a checkpoint that replica sent fetches the chunks it lacks
	// (docs/decisions/0010-chunked-store.md). Answered from that replica's
	// own store, by any replica, outside the journal.
	KindFetchChunk
	kindEnd
)

var kindNames = [...]string{"invalid", "register", "create", "mkdir", "mknod", "symlink", "link",
	"unlink", "rmdir", "rename", "write", "truncate", "fallocate", "setattr", "setxattr",
	"removexattr", "lookup", "getattr", "read", "readdir", "readlink", "getxattr", "listxattr", "statfs", "release", "fence", "reserve-inos", "fetch-chunk"}

func (k Kind) String() string {
	if k < kindEnd {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Valid reports whether k is a known operation.
func (k Kind) Valid() bool { return k > KindInvalid && k < kindEnd }

// Mutates reports whether k changes state and so goes through the journal.
func (k Kind) Mutates() bool {
	return k >= KindRegister && k <= KindRemovexattr || k == KindRelease || k == KindFence || k == KindReserveInos
}

// Rename flags (Linux renameat2).
const (
	RenameNoReplace uint32 = 1 << 0 // RENAME_NOREPLACE
	RenameExchange  uint32 = 1 << 1 // RENAME_EXCHANGE
)

// KeepOrphan (Unlink, Rename) keeps a non-directory inode whose last name
// goes away as an orphan of the calling session, because the caller still
// has it open: it stays readable, writable and stat-able by inode number
// until a Release, or until the session is evicted.
const KeepOrphan uint32 = 1 << 8

// Write flags.
const (
	// WriteAppend writes at the file's current end (O_APPEND), decided at
	// apply time so concurrent appends never overlap.
	WriteAppend uint32 = 1 << 0
)

// ReservedIno (Create) says the client chose NewIno from a range ReserveInos
// gave it, and Time: a mount that answers a create before its commit
// (create-behind) has already told the kernel the new file's number and
// times, so the engine must use them.
const ReservedIno uint32 = 1 << 9

// MaxReserveInos bounds the inode numbers one ReserveInos hands out.
const MaxReserveInos = 1 << 16

// Setxattr flags (Linux).
const (
	XattrCreate  uint32 = 1 // XATTR_CREATE
	XattrReplace uint32 = 2 // XATTR_REPLACE
)

// Fallocate modes (Linux).
const (
	FallocKeepSize  uint32 = 0x01 // FALLOC_FL_KEEP_SIZE
	FallocPunchHole uint32 = 0x02 // FALLOC_FL_PUNCH_HOLE
)

// Setattr validity bits: which fields of an Op a KindSetattr changes.
const (
	SetMode uint32 = 1 << iota
	SetUID
	SetGID
	SetSize
	SetAtime
	SetMtime
	SetAtimeNow
	SetMtimeNow
)

// RootIno is the inode number of the volume's root directory.
const RootIno uint64 = 1

// Op is one operation. Which fields matter depends on Kind:
//
//	Register              Session
//	Create/Mkdir/Mknod    Ino=parent, Name, Mode, UID, GID, Rdev (mknod); Create: Flags (ReservedIno), NewIno, Time
//	Symlink               Ino=parent, Name, Data=target, UID, GID
//	Link                  Ino=target inode, Ino2=new parent, Name
//	Unlink/Rmdir          Ino=parent, Name, Flags (KeepOrphan)
//	Rename                Ino=old parent, Name, Ino2=new parent, Name2, Flags (+KeepOrphan)
//	Write                 Ino, Offset, Data, Flags (WriteAppend)
//	Truncate              Ino, Size
//	Fallocate             Ino, Offset, Size=length, Flags=mode
//	Setattr               Ino, Valid, Mode, UID, GID, Size, Atime, Mtime
//	Setxattr              Ino, Name, Data=value, Flags
//	Removexattr           Ino, Name
//	Lookup                Ino=parent, Name
//	Getattr/Readlink      Ino
//	Read                  Ino, Offset, Size=length
//	Readdir               Ino, Offset=first entry index, Size=max entries
//	Getxattr/Listxattr    Ino, Name (getxattr)
//	Release               Ino (frees an orphan kept by KeepOrphan)
//	Fence                 (none: opens the volume's next fencing epoch, returned in N)
//	ReserveInos           Size=count (hands out count never-used inode numbers from N)
//
// Session and Seq identify a mutation for exactly-once application; Acked
// tells the state machine that every result of this session below Acked has
// been received, so it may forget them. NewIno and Time are stamped by the
// coordinator, never trusted from a client, except a Create with ReservedIno:
// its NewIno must lie below every number the coordinator has handed out (so
// in a range some ReserveInos returned) and be unused, and its Time is the
// client's.
//
// Epoch is the fencing epoch of the single-writer mount that sends the
// operation (0: an unfenced client, such as a multi-writer mount). An
// operation whose epoch is below the volume's newest is refused, mutations
// by the state machine and queries by the coordinator's read path
// (docs/replica-engine.md, "Fencing").
type Op struct {
	Kind    Kind
	Session uint64
	Seq     uint64
	Acked   uint64
	Ino     uint64
	Ino2    uint64
	Name    string
	Name2   string
	Mode    uint32
	UID     uint32
	GID     uint32
	Rdev    uint32
	Flags   uint32
	Valid   uint32
	Offset  uint64
	Size    uint64
	Atime   int64
	Mtime   int64
	Data    []byte
	NewIno  uint64
	Time    int64
	Epoch   uint64
}

// Attr is the attribute set of one inode. Mode carries the file type bits
// (syscall.S_IFREG, S_IFDIR, ...) and the permission bits. Times are Unix
// nanoseconds assigned by the coordinator.
type Attr struct {
	Ino   uint64
	Mode  uint32
	Nlink uint32
	UID   uint32
	GID   uint32
	Rdev  uint32
	Size  uint64
	Atime int64
	Mtime int64
	Ctime int64
}

// NewAttr is the attributes of an inode the engine has just made with one
// link, before its kind's additions (a directory's second link, a
// symlink's size). A create-behind client answers a new file's attributes
// before the engine makes it, so both derive them here.
func NewAttr(ino uint64, mode, uid, gid uint32, t int64) Attr {
	return Attr{Ino: ino, Mode: mode, Nlink: 1, UID: uid, GID: gid, Atime: t, Mtime: t, Ctime: t}
}

// IsDir reports whether the inode is a directory.
func (a Attr) IsDir() bool { return a.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// IsRegular reports whether the inode is a regular file.
func (a Attr) IsRegular() bool { return a.Mode&syscall.S_IFMT == syscall.S_IFREG }

// Blocks is the number of 512-byte blocks the file's size accounts for.
func (a Attr) Blocks() uint64 { return (a.Size + 511) / 512 }

// DirEntry is one directory entry.
type DirEntry struct {
	Name string
	Ino  uint64
	Mode uint32 // file type bits only
}

// StatFs describes the volume's capacity.
type StatFs struct {
	Capacity uint64
	Used     uint64
	Inodes   uint64
}

// Result is the outcome of one operation. Errno is 0 on success.
type Result struct {
	Errno   uint32
	Attr    Attr
	N       uint64
	Data    []byte
	Entries []DirEntry
	Names   []string
	StatFs  StatFs
	// Frame, when set, is the pooled buffer (ReadBuffer) that Data lies in,
	// at ReplyHeadroom: ReplyFrame then writes the frame's header in front
	// of Data inside it instead of copying Data, and Reply.Release returns
	// it. In the client it is the received frame Data aliases, which the
	// caller may return with PutBuf once done with Data. Not encoded.
	Frame []byte
}

// Err returns the result's error as a syscall.Errno, or nil.
func (r Result) Err() error {
	if r.Errno == 0 {
		return nil
	}
	return syscall.Errno(r.Errno)
}

// Entry is one Raft log entry: a batch of mutations stamped with the
// coordinator's time.
type Entry struct {
	Time int64
	Ops  []Op
}

// ALPN protocol names multiplexed on a worker's single TLS port.
const (
	ProtoRaft = "cellfleet-raft/1"
	ProtoRPC  = "cellfleet-rpc/1"
)

// Errnos outside the syscall range, used inside a worker only: the worker
// turns them into a call Status and never sends them as a file error.
const (
	ErrnoSessionExpired uint32 = 0xC0000001 // session not in the exactly-once table
	ErrnoStaleSequence  uint32 = 0xC0000002 // sequence below the acknowledged floor
	ErrnoWindowFull     uint32 = 0xC0000003 // too many unacknowledged results
	ErrnoFenced         uint32 = 0xC0000004 // the operation's fencing epoch was superseded
)
