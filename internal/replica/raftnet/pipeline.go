package raftnet

// Pipelined AppendEntries, as raft's netPipeline: requests are written on a
// dedicated connection without waiting, a goroutine reads the responses in
// order. The in-progress channel is MaxInFlight-2 deep because one request
// is sent before it blocks and the reader holds another: raft's own
// arithmetic (net_transport.go, newNetPipeline).

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// AppendEntriesPipeline implements raft.Transport.
func (t *Transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if t.cfg.MaxInFlight < 2 {
		return nil, raft.ErrPipelineReplicationNotSupported
	}
	c, err := t.getConn(id, target)
	if err != nil {
		return nil, err
	}
	p := &pipeline{t: t, c: c,
		inflight: make(chan *future, t.cfg.MaxInFlight-2),
		done:     make(chan raft.AppendFuture, t.cfg.MaxInFlight-2),
		stop:     make(chan struct{})}
	go p.receive()
	return p, nil
}

type pipeline struct {
	t        *Transport
	c        *conn
	inflight chan *future
	done     chan raft.AppendFuture
	stop     chan struct{}
	once     sync.Once
}

func (p *pipeline) receive() {
	for {
		select {
		case f := <-p.inflight:
			if p.t.cfg.Timeout > 0 {
				_ = p.c.c.SetReadDeadline(time.Now().Add(p.t.cfg.Timeout))
			}
			_, err := receive(p.c, f.resp)
			f.err = err
			close(f.ready)
			select {
			case p.done <- f:
			case <-p.stop:
				return
			}
		case <-p.stop:
			return
		}
	}
}

// AppendEntries implements raft.AppendPipeline.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	f := &future{start: time.Now(), req: args, resp: resp, ready: make(chan struct{})}
	if p.t.cfg.Timeout > 0 {
		_ = p.c.c.SetWriteDeadline(time.Now().Add(p.t.cfg.Timeout))
	}
	if err := p.t.send(p.c, rpcAppendEntries, args); err != nil {
		return nil, err
	}
	select {
	case p.inflight <- f:
		return f, nil
	case <-p.stop:
		return nil, raft.ErrPipelineShutdown
	}
}

// Consumer implements raft.AppendPipeline.
func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.done }

// Close implements raft.AppendPipeline: the connection is closed, which
// also ends a receive in progress.
func (p *pipeline) Close() error {
	p.once.Do(func() {
		p.c.release()
		close(p.stop)
	})
	return nil
}

// future is one pipelined request.
type future struct {
	start time.Time
	req   *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	err   error
	ready chan struct{}
}

func (f *future) Error() error {
	<-f.ready
	return f.err
}

func (f *future) Start() time.Time                      { return f.start }
func (f *future) Request() *raft.AppendEntriesRequest   { return f.req }
func (f *future) Response() *raft.AppendEntriesResponse { return f.resp }
