package client

// Creates sent behind: a single-writer mount answers a create before its
// commit (internal/fuse, create-behind), so one thread creating files is
// not held to one commit per file. CreateBehind sends the create and
// returns; every later call of this client (but another CreateBehind) first
// waits until the creates sent before it have been answered, so whatever
// the mount does next with a new file reaches the engine after the file
// exists, and a Settle is the point from which they are all durable.

import (
	"context"
	"fmt"
	"sync"
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// MaxBehind bounds the creates sent and not yet answered; CreateBehind waits
// for a free slot beyond it.
const MaxBehind = 128

type behind struct {
	slots chan struct{} // one token per create in flight

	mu     sync.Mutex
	next   uint64              // ticket of the next create
	out    map[uint64]struct{} // tickets not yet answered
	answer chan struct{}       // closed and replaced at each answer
}

func newBehind() behind {
	return behind{slots: make(chan struct{}, MaxBehind), out: map[uint64]struct{}{}, answer: make(chan struct{})}
}

// ReserveInos hands this client n inode numbers no other create will get,
// from the returned first one, for CreateBehind.
func (c *Client) ReserveInos(ctx context.Context, n uint64) (uint64, error) {
	r, err := c.one(ctx, wire.Op{Kind: wire.KindReserveInos, Size: n})
	if err != nil {
		return 0, fmt.Errorf("reserve %d inode numbers: %w", n, err)
	}
	return r.N, nil
}

// NewFileAttr is the attributes the engine gives a regular file created as
// inode ino at time t (Unix nanoseconds), for CreateBehind.
func NewFileAttr(ino uint64, mode, uid, gid uint32, t int64) Attr {
	return wire.NewAttr(ino, syscall.S_IFREG|mode&^syscall.S_IFMT, uid, gid, t)
}

// CreateBehind sends the create of regular file name in parent with the
// attributes a (NewFileAttr; its inode number taken once from a
// ReserveInos range) and returns without waiting for the commit. done gets
// the outcome once answered, before any Settle waiting for it returns, and
// must not call the client; an error is the engine's refusal or, as with
// any mutation, an uncertain outcome (ErrUncertain).
func (c *Client) CreateBehind(ctx context.Context, parent uint64, name string, a Attr, done func(error)) error {
	op := wire.Op{Kind: wire.KindCreate, Ino: parent, Name: name, Mode: a.Mode, UID: a.UID, GID: a.GID,
		Flags: wire.ReservedIno, NewIno: a.Ino, Time: a.Ctime}
	b := &c.behind
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	ticket := b.next
	b.next++
	b.out[ticket] = struct{}{}
	b.mu.Unlock()
	go func() {
		res, err := c.send(context.WithoutCancel(ctx), []wire.Op{op})
		if err == nil {
			err = res[0].Err()
		}
		// The caller learns the outcome before any Settle returns, so a
		// failure it reports at a later fsync cannot be missed. done must
		// not call this client (its own Settle would wait for itself).
		done(err)
		b.mu.Lock()
		delete(b.out, ticket)
		close(b.answer)
		b.answer = make(chan struct{})
		b.mu.Unlock()
		<-b.slots
	}()
	return nil
}

// Settle waits until every create sent behind before it has been answered.
func (c *Client) Settle(ctx context.Context) error {
	b := &c.behind
	b.mu.Lock()
	if len(b.out) == 0 {
		b.mu.Unlock()
		return nil
	}
	before := b.next
	for {
		waiting := false
		for t := range b.out {
			if t < before {
				waiting = true
				break
			}
		}
		answer := b.answer
		b.mu.Unlock()
		if !waiting {
			return nil
		}
		select {
		case <-answer:
		case <-ctx.Done():
			return fmt.Errorf("wait for the creates sent before: %w", ctx.Err())
		}
		b.mu.Lock()
	}
}
