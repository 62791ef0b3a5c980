package fsm

// Inode numbers for creates answered before their commit. A single-writer
// mount that answers a create at once (create-behind, internal/fuse) must
// tell the kernel the new file's number before the engine has made it, so
// it asks for a range of never-used numbers first (KindReserveInos) and
// names the one it took in each create (wire.ReservedIno). The range is
// stamped by the coordinator like any allocation and applied here by moving
// the volume's allocation floor past it, so no later allocation, on any
// replica or replay, hands out the same numbers.

import (
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// reserveInos hands out op.Size numbers starting at the coordinator's
// op.NewIno.
func (f *FSM) reserveInos(op *wire.Op) wire.Result {
	if op.Size == 0 || op.Size > wire.MaxReserveInos {
		return errno(syscall.EINVAL)
	}
	if op.NewIno < f.st.NextIno {
		// Below the floor: a coordinator fault, refused on every replica.
		return errno(syscall.EIO)
	}
	f.st.NextIno = op.NewIno + op.Size
	return wire.Result{N: op.NewIno}
}
