package client

// Creates sent behind, the client side of the engine's reserved creates
// (docs/replica-engine.md). The mount no longer uses them: it commits a
// create before answering it (docs/decisions/0009-settled-operations.md);
// the engine's tests of reserved creates do. CreateBehind queues the create and
// returns; every later call of this client (but another CreateBehind) first
// waits until the creates sent before it have been answered, so whatever
// the mount does next with a new file reaches the engine after the file
// exists, and a Settle is the point from which they are all durable.
//
// At most behindCalls engine calls carry creates at once. A create that
// finds one free leaves at once; creates that arrive while they are all
// busy queue and leave together as one call, so one journal entry (one
// proposal, one replication, one apply) carries them all. Each create is
// its own operation with its own result, so one refused create fails alone.
// Sent one call each, the creates of one thread were held to raft's batch of
// MaxAppendEntries entries per journal write (docs/performance.md).

import (
	"context"
	"fmt"
	"sync"
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// MaxBehind bounds the creates queued or sent and not yet answered;
// CreateBehind waits for a free slot beyond it.
const MaxBehind = 128

// behindCalls bounds the engine calls carrying creates at once, as the
// mount's write batcher bounds its calls (internal/fuse, batch.go).
const behindCalls = 4

type behind struct {
	slots chan struct{} // one token per create queued or in flight

	mu     sync.Mutex
	next   uint64              // ticket of the next create
	out    map[uint64]struct{} // tickets not yet answered
	answer chan struct{}       // closed and replaced at each answer
	queue  []behindCreate      // creates waiting for a call
	calls  int                 // calls carrying creates now
}

// behindCreate is one create queued behind.
type behindCreate struct {
	op     wire.Op
	done   func(error)
	ticket uint64
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
	b.queue = append(b.queue, behindCreate{op: op, done: done, ticket: ticket})
	start := b.calls < behindCalls
	if start {
		b.calls++
	}
	b.mu.Unlock()
	if start {
		go c.sendBehind(context.WithoutCancel(ctx))
	}
	return nil
}

// sendBehind sends the queued creates, as many as one call takes at a
// time, until none is queued.
func (c *Client) sendBehind(ctx context.Context) {
	b := &c.behind
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.calls--
			b.mu.Unlock()
			return
		}
		n := min(len(b.queue), c.cfg.MaxSpan)
		batch := b.queue[:n]
		b.queue = append([]behindCreate(nil), b.queue[n:]...)
		b.mu.Unlock()

		ops := make([]wire.Op, len(batch))
		for i := range batch {
			ops[i] = batch[i].op
		}
		res, err := c.send(ctx, ops)
		// The callers learn the outcomes before any Settle returns, so a
		// failure one reports at a later fsync cannot be missed. done must
		// not call this client (its own Settle would wait for itself).
		for i := range batch {
			e := err
			if e == nil {
				e = res[i].Err()
			}
			batch[i].done(e)
		}
		b.mu.Lock()
		for i := range batch {
			delete(b.out, batch[i].ticket)
		}
		close(b.answer)
		b.answer = make(chan struct{})
		b.mu.Unlock()
		for range batch {
			<-b.slots
		}
	}
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
