package replica

import (
	"fmt"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// stampInos gives each inode a call makes its number and clears what a
// client may not choose (the entry's time applies to every operation but a
// reserved create: wire.ReservedIno). Run under Worker.propMu, so entries
// reach the log in allocation order.
func (l *leadership) stampInos(ops []wire.Op) error {
	next := l.nextIno
	for i := range ops {
		op := &ops[i]
		if op.Kind == wire.KindCreate && op.Flags&wire.ReservedIno != 0 {
			// The number must come from a range handed out before this
			// call; the state machine checks that no inode holds it.
			if op.NewIno <= wire.RootIno || op.NewIno >= l.nextIno {
				return fmt.Errorf("operation %d creates inode %d, which no reservation handed out (next unreserved %d)", i, op.NewIno, l.nextIno)
			}
			if op.Time <= 0 {
				return fmt.Errorf("operation %d creates reserved inode %d without a time", i, op.NewIno)
			}
			continue
		}
		op.Time, op.NewIno = 0, 0
		switch op.Kind {
		case wire.KindCreate, wire.KindMkdir, wire.KindMknod, wire.KindSymlink:
			op.NewIno = next
			next++
		case wire.KindReserveInos:
			op.NewIno = next
			next += op.Size
		}
	}
	l.nextIno = next
	return nil
}
