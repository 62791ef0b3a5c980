package fuse

// Write batching (group commit). Every WRITE waits until the engine has
// committed it on a quorum, so one writer alone gets one commit per request.
// Several writers (threads, files, or the kernel's parallel dispatch of a
// large write) would each pay a quorum round; instead the batcher keeps at
// most InFlight engine calls committing, and while they are busy the writes
// that arrive queue up and leave together as one WriteBatch: one log entry,
// one journal fsync per replica, one result per write. A lone write never
// waits for company: if a slot is free it leaves at once.

import (
	"context"
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// BatchOptions bounds write batching. docs/performance.md (## FUSE mount)
// records the measurements behind the defaults.
type BatchOptions struct {
	// MaxOps is the largest number of writes in one engine entry.
	MaxOps int
	// MaxBytes is the largest payload of one engine entry, at most the
	// engine's per-call data limit (wire.MaxData, 4 MiB).
	MaxBytes int
	// InFlight is how many engine calls commit at once.
	InFlight int
}

const (
	defaultBatchOps   = 64
	defaultBatchBytes = wire.MaxData
	// defaultBatchInFlight is one call committing at a time: with four, a
	// 1 GiB write-behind stream ran at half the rate for 1.7 times the
	// processor time, the hosts faulting in twice the fresh memory
	// (docs/performance.md, "Data-path optimisations: what each buys").
	defaultBatchInFlight = 1
)

func (b BatchOptions) withDefaults() BatchOptions {
	if b.MaxOps <= 0 {
		b.MaxOps = defaultBatchOps
	}
	if b.MaxBytes <= 0 || b.MaxBytes > wire.MaxData {
		b.MaxBytes = defaultBatchBytes
	}
	if b.InFlight <= 0 {
		b.InFlight = defaultBatchInFlight
	}
	return b
}

type pendingWrite struct {
	req    client.WriteReq
	attr   client.Attr
	err    error
	done   chan struct{}
	notify func(error) // write-behind: called when the outcome is known
}

type batcher struct {
	cl    *client.Client
	opt   BatchOptions
	queue chan *pendingWrite
	slots chan struct{}
	stop  chan struct{}
}

func newBatcher(cl *client.Client, opt BatchOptions) *batcher {
	b := &batcher{cl: cl, opt: opt, queue: make(chan *pendingWrite, 4*opt.MaxOps),
		slots: make(chan struct{}, opt.InFlight), stop: make(chan struct{})}
	go b.run()
	return b
}

// write commits data at off in ino and returns the inode's new attributes.
func (b *batcher) write(ino, off uint64, data []byte) (client.Attr, error) {
	p := &pendingWrite{req: client.WriteReq{Ino: ino, Offset: off, Data: data}, done: make(chan struct{})}
	select {
	case b.queue <- p:
	case <-b.stop:
		return client.Attr{}, syscall.EIO
	}
	<-p.done
	return p.attr, p.err
}

// submit queues data at off in ino and returns without waiting; notify
// receives the outcome.
func (b *batcher) submit(ino, off uint64, data []byte, notify func(error)) {
	p := &pendingWrite{req: client.WriteReq{Ino: ino, Offset: off, Data: data},
		done: make(chan struct{}), notify: notify}
	select {
	case b.queue <- p:
	case <-b.stop:
		notify(syscall.EIO)
	}
}

// finish publishes p's outcome.
func (p *pendingWrite) finish() {
	close(p.done)
	if p.notify != nil {
		p.notify(p.err)
	}
}

func (b *batcher) close() { close(b.stop) }

// abandon fails what is still queued once the mount is gone, so nobody
// waits for a write that will never be sent.
func (b *batcher) abandon() {
	for {
		select {
		case p := <-b.queue:
			p.err = syscall.EIO
			p.finish()
		default:
			return
		}
	}
}

func (b *batcher) run() {
	var carry *pendingWrite
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-b.queue:
			case <-b.stop:
				b.abandon()
				return
			}
		}
		// Wait for a commit slot first: whatever arrives meanwhile joins
		// this batch.
		b.slots <- struct{}{}
		batch, size := []*pendingWrite{first}, len(first.req.Data)
	drain:
		for len(batch) < b.opt.MaxOps {
			select {
			case p := <-b.queue:
				if size+len(p.req.Data) > b.opt.MaxBytes {
					carry = p
					break drain
				}
				batch = append(batch, p)
				size += len(p.req.Data)
			default:
				break drain
			}
		}
		go b.commit(batch)
	}
}

func (b *batcher) commit(batch []*pendingWrite) {
	defer func() { <-b.slots }()
	ctx := context.Background()
	if len(batch) == 1 {
		p := batch[0]
		p.attr, p.err = b.cl.Write(ctx, p.req.Ino, p.req.Offset, p.req.Data)
		p.finish()
		return
	}
	reqs := make([]client.WriteReq, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	res, err := b.cl.WriteBatch(ctx, reqs)
	for i, p := range batch {
		switch {
		case err != nil:
			p.err = err
		case i >= len(res):
			p.err = syscall.EIO
		default:
			p.attr, p.err = res[i].Attr, res[i].Err()
		}
		p.finish()
	}
}
