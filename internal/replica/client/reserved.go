package client

// Creates with inode numbers the client chose from a reserved range, the
// client side of the engine's reserved creates (docs/replica-engine.md).
// The mount commits every create before answering it and takes its number
// from the engine (docs/decisions/0009-settled-operations.md); the engine
// still applies reserved creates, which earlier journals hold, and its
// tests send them through these calls.

import (
	"context"
	"fmt"
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// ReserveInos hands this client n inode numbers no other create will get,
// from the returned first one, for CreateReserved.
func (c *Client) ReserveInos(ctx context.Context, n uint64) (uint64, error) {
	r, err := c.one(ctx, wire.Op{Kind: wire.KindReserveInos, Size: n})
	if err != nil {
		return 0, fmt.Errorf("reserve %d inode numbers: %w", n, err)
	}
	return r.N, nil
}

// NewFileAttr is the attributes the engine gives a regular file created as
// inode ino at time t (Unix nanoseconds), for CreateReserved.
func NewFileAttr(ino uint64, mode, uid, gid uint32, t int64) Attr {
	return wire.NewAttr(ino, syscall.S_IFREG|mode&^syscall.S_IFMT, uid, gid, t)
}

// CreateReserved creates regular file name in parent with the attributes a
// (NewFileAttr; its inode number taken once from a ReserveInos range) and
// returns once the create is committed, refused or uncertain.
func (c *Client) CreateReserved(ctx context.Context, parent uint64, name string, a Attr) error {
	_, err := c.one(ctx, wire.Op{Kind: wire.KindCreate, Ino: parent, Name: name, Mode: a.Mode, UID: a.UID, GID: a.GID,
		Flags: wire.ReservedIno, NewIno: a.Ino, Time: a.Ctime})
	return err
}
