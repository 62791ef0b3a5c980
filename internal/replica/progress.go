package replica

// The coordinator's view of each follower's journal. hashicorp/raft keeps
// every follower's match index (the highest index the follower has durably
// appended and acknowledged) inside its replication goroutines and does not
// export it, so the worker observes the same acknowledgements on the
// transport: a successful AppendEntries carrying entries matches up to its
// last entry, a successful InstallSnapshot up to the checkpoint's index.
// That is exactly when raft itself advances the match index, so lag here is
// raft's own replication state, not an estimate.

import (
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/raftnet"
)

// FollowerProgress is one follower as the coordinator sees it.
type FollowerProgress struct {
	ID string `json:"id"`
	// MatchIndex is the highest index the follower acknowledged as appended
	// to its journal in the current term (0: nothing acknowledged yet in this
	// term, e.g. unreachable since the election).
	MatchIndex uint64 `json:"matchIndex"`
	// LagEntries is the coordinator's last index minus MatchIndex.
	LagEntries uint64 `json:"lagEntries"`
}

type matched struct{ term, index uint64 }

// progress records acknowledged appends per follower and term.
type progress struct {
	mu    sync.Mutex
	match map[raft.ServerID]matched
}

func (p *progress) record(id raft.ServerID, term, index uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.match == nil {
		p.match = map[raft.ServerID]matched{}
	}
	m := p.match[id]
	if term > m.term || term == m.term && index > m.index {
		p.match[id] = matched{term: term, index: index}
	}
}

// appended notes a successful AppendEntries the way raft's
// updateLastAppended does: only a request carrying entries moves the match.
func (p *progress) appended(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if resp == nil || !resp.Success || resp.Term != req.Term || len(req.Entries) == 0 {
		return
	}
	p.record(id, req.Term, req.Entries[len(req.Entries)-1].Index)
}

// of returns the match index of id in term.
func (p *progress) of(id raft.ServerID, term uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.match[id]; m.term == term {
		return m.index
	}
	return 0
}

// observedTransport is the worker's raft transport with the coordinator's
// acknowledgements recorded. Embedding keeps every optional interface raft
// looks for (WithClose, WithPreVote).
type observedTransport struct {
	*raftnet.Transport
	p  *progress
	in *inbound
}

// Consumer hands raft the incoming RPCs through the relay that notes the
// coordinator's commit index (health.go).
func (t observedTransport) Consumer() <-chan raft.RPC {
	return t.in.consumer(t.Transport.Consumer())
}

func (t observedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.Transport.AppendEntries(id, target, req, resp)
	if err == nil {
		t.p.appended(id, req, resp)
	}
	return err
}

func (t observedTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, req *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	err := t.Transport.InstallSnapshot(id, target, req, resp, data)
	if err == nil && resp.Success && resp.Term == req.Term {
		t.p.record(id, req.Term, req.LastLogIndex)
	}
	return err
}

func (t observedTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	inner, err := t.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	o := &observedPipeline{AppendPipeline: inner, id: id, p: t.p,
		out: make(chan raft.AppendFuture, pipelineDepth), stop: make(chan struct{})}
	go o.relay()
	return o, nil
}

// pipelineDepth matches the network transport's own in-flight bound, so the
// relay adds no back-pressure of its own.
const pipelineDepth = 128

// observedPipeline relays the pipeline's completed appends to raft after
// recording them. A future reaches Consumer only once it has its response.
type observedPipeline struct {
	raft.AppendPipeline
	id   raft.ServerID
	p    *progress
	out  chan raft.AppendFuture
	stop chan struct{}
	once sync.Once
}

func (o *observedPipeline) Consumer() <-chan raft.AppendFuture { return o.out }

func (o *observedPipeline) Close() error {
	err := o.AppendPipeline.Close()
	o.once.Do(func() { close(o.stop) })
	return err
}

func (o *observedPipeline) relay() {
	in := o.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			if f.Error() == nil {
				o.p.appended(o.id, f.Request(), f.Response())
			}
			select {
			case o.out <- f:
			case <-o.stop:
				return
			}
		case <-o.stop:
			return
		}
	}
}

// followers reports every other voter's progress while this worker leads.
func (w *Worker) followers(r *raft.Raft, last uint64) []FollowerProgress {
	if r.State() != raft.Leader {
		return nil
	}
	fut := r.GetConfiguration()
	if fut.Error() != nil {
		return nil
	}
	term := r.CurrentTerm()
	var out []FollowerProgress
	for _, s := range fut.Configuration().Servers {
		if s.ID == raft.ServerID(w.cfg.Replica) {
			continue
		}
		m := w.progress.of(s.ID, term)
		out = append(out, FollowerProgress{ID: string(s.ID), MatchIndex: m, LagEntries: last - min(m, last)})
	}
	return out
}

// Lag is how many committed entries this replica has not applied yet,
// counted from the coordinator's commit index (Stats.CoordinatorCommit):
// its distance behind the coordinator, what a VolumeReplica's status.lag
// reports (docs/decisions/0006-replica-replacement.md: a replacement is
// caught up within 64 entries of its coordinator). A follower still
// receiving a checkpoint, or whose journal stalls, is as far behind as the
// coordinator has committed past its applied state, though its own commit
// index may equal its applied index.
func (s Stats) Lag() uint64 {
	return s.CoordinatorCommit - min(s.AppliedIndex, s.CoordinatorCommit)
}
