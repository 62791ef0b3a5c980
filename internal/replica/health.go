package replica

// A worker's health: whether it is a working member of its group right now,
// not only whether it runs. A follower can run, answer heartbeats and apply
// checkpoints while every append to its journal fails (raft only logs that
// and answers the coordinator "no"), or while its journal stops advancing
// behind the coordinator's: the volume then has less redundancy than its
// status says. Health reports either within seconds, and the host's status,
// /readyz and metrics carry it.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// StallAfter is how long a follower's journal may stay behind what the
// coordinator committed (or sent it) without advancing before the worker reports itself
// unhealthy. A follower catching up advances every few milliseconds; one
// receiving a long checkpoint transfer is reported unhealthy meanwhile,
// which is true: it cannot yet take part in a quorum.
const StallAfter = 3 * time.Second

// healthSample is how often the worker samples its own last index.
const healthSample = 250 * time.Millisecond

// Health is a worker's verdict on itself.
type Health struct {
	Healthy bool
	Reason  string // why not healthy
}

// leaderView is what a follower learns of the coordinator from the
// AppendEntries it receives: the coordinator's commit index, and the last
// entry the coordinator sent it in the current term. A follower whose disk
// stops moving learns nothing more of the commit index: raft's heartbeats
// carry none, and the coordinator sends the next entries only once the
// stuck append is answered. The entries already in hand are what shows the
// stall: a working follower stores them within milliseconds.
type leaderView struct {
	commit atomic.Uint64
	mu     sync.Mutex
	sent   termIndex // guarded by mu
}

type termIndex struct{ term, index uint64 }

// saw notes one AppendEntries. Within a term the coordinator's log only
// grows, so the highest entry sent in the term is one the follower must
// hold; a newer term's coordinator may have a shorter log, so it starts over.
func (v *leaderView) saw(req *raft.AppendEntriesRequest) {
	v.commit.Store(req.LeaderCommitIndex)
	n := len(req.Entries)
	if n == 0 {
		return
	}
	last := req.Entries[n-1].Index
	v.mu.Lock()
	defer v.mu.Unlock()
	if req.Term > v.sent.term || req.Term == v.sent.term && last > v.sent.index {
		v.sent = termIndex{term: req.Term, index: last}
	}
}

// sawCheckpoint notes an InstallSnapshot. The coordinator committed the
// checkpoint's last index, so that is a commit index it has reached even
// when no AppendEntries said so: a follower too far behind for the journal
// gets the checkpoint first (raft sends no entries it no longer holds), and
// it must still know how far behind it is (Stats.Lag).
func (v *leaderView) sawCheckpoint(req *raft.InstallSnapshotRequest) {
	for {
		cur := v.commit.Load()
		if req.LastLogIndex <= cur || v.commit.CompareAndSwap(cur, req.LastLogIndex) {
			return
		}
	}
}

// target is the index this follower's journal must reach: the commit index
// it knows, or the last entry sent to it in term, whichever is higher.
func (v *leaderView) target(term uint64) uint64 {
	t := v.commit.Load()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sent.term == term {
		t = max(t, v.sent.index)
	}
	return t
}

// inbound relays the RPCs raft consumes, noting the coordinator's commit
// index on the way (from AppendEntries and checkpoint transfers).
type inbound struct {
	view *leaderView
	once sync.Once
	out  chan raft.RPC
	stop <-chan struct{}
}

func (in *inbound) consumer(src <-chan raft.RPC) <-chan raft.RPC {
	in.once.Do(func() {
		in.out = make(chan raft.RPC)
		go in.relay(src)
	})
	return in.out
}

func (in *inbound) relay(src <-chan raft.RPC) {
	for {
		select {
		case rpc := <-src:
			switch req := rpc.Command.(type) {
			case *raft.AppendEntriesRequest:
				in.view.saw(req)
			case *raft.InstallSnapshotRequest:
				in.view.sawCheckpoint(req)
			}
			select {
			case in.out <- rpc:
			case <-in.stop:
				return
			}
		case <-in.stop:
			return
		}
	}
}

// progressMark is the worker's own last index, whether the coordinator had
// committed or sent entries past it, and since when both have been so.
type progressMark struct {
	index  uint64
	behind bool
	at     time.Time
}

// sampleProgress records the worker's last index; the clock restarts when
// it moves or when the worker falls behind (an idle follower that was level
// is not stalled the moment new entries are committed).
func (w *Worker) sampleProgress(r *raft.Raft) {
	idx := r.LastIndex()
	behind := w.view.target(r.CurrentTerm()) > idx
	m := w.mark.Load()
	if m == nil || m.index != idx || m.behind != behind {
		w.mark.Store(&progressMark{index: idx, behind: behind, at: time.Now()})
	}
}

// Health reports whether the worker is a working member of its group.
func (w *Worker) Health() Health {
	st, reason := w.State()
	if st != ReplicaStateRunning {
		return Health{Reason: fmt.Sprintf("state %s %s", st, reason)}
	}
	if f := w.wal.Failing(); f != nil {
		return Health{Reason: fmt.Sprintf("journal appends failing since %s: %v", f.Since.UTC().Format(time.RFC3339), f.Err)}
	}
	r := w.shared.Load()
	if r == nil || r.State() != raft.Follower {
		return Health{Healthy: true}
	}
	m := w.mark.Load()
	target := w.view.target(r.CurrentTerm())
	if m != nil && m.behind && target > m.index && time.Since(m.at) > StallAfter {
		return Health{Reason: fmt.Sprintf("journal stalled at index %d for %s while the coordinator committed or sent up to %d",
			m.index, time.Since(m.at).Round(time.Second), target)}
	}
	return Health{Healthy: true}
}
