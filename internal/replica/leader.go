package replica

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// leadership is the coordinator's state for one term. It exists only after
// a barrier in the term has applied every entry of earlier terms, so the
// inode allocator starts above every number ever used and reads never miss
// an entry a previous coordinator acknowledged.
type leadership struct {
	term    uint64
	barrier uint64 // applied index once the barrier completed
	nextIno uint64 // guarded by Worker.propMu
}

func (w *Worker) leadership(notify <-chan bool) {
	defer w.wg.Done()
	for {
		select {
		case <-w.stop:
			return
		case leader := <-notify:
			w.lead.Store(nil)
			if !leader {
				w.log.Info("no longer coordinator")
				continue
			}
			w.establish()
		}
	}
}

// establish runs the term's barrier and publishes the leadership.
func (w *Worker) establish() {
	term := w.raft.CurrentTerm()
	if err := w.raft.Barrier(w.cfg.ApplyTimeout).Error(); err != nil {
		w.log.Warn("coordinator barrier failed; not serving this term", "term", term, "error", err)
		return
	}
	if w.raft.State() != raft.Leader || w.raft.CurrentTerm() != term {
		return
	}
	if err := w.commitLimits(); err != nil {
		w.log.Warn("coordinator could not commit the volume's limits; not serving this term", "term", term, "error", err)
		return
	}
	l := &leadership{term: term, barrier: w.raft.AppliedIndex(), nextIno: w.fsm.NextIno()}
	w.lead.Store(l)
	w.log.Info("coordinating", "term", term, "applied", l.barrier)
}

// verifier is the read index's quorum check (docs/replica-engine.md, "Data
// path": a read waits for the coordinator's authority, confirmed by a quorum,
// and for the state applied up to the commit index it saw when it arrived; no
// leader lease). Reads share rounds: a read joins a round that has not yet
// started its VerifyLeader, which then proves the authority held after the
// read arrived; a read arriving while a round is under way waits for the next
// one. Concurrent reads (the kernel's readahead sends several) therefore cost
// one round together, not one each.
type verifier struct {
	r       *raft.Raft
	mu      sync.Mutex
	running *round
	next    *round
	// rounds counts VerifyLeader calls, reads the reads that waited for
	// one (Stats, the host's metrics).
	rounds, reads atomic.Uint64
}

type round struct {
	done chan struct{}
	err  error
	// started: VerifyLeader was called, so a read arriving now could
	// follow a newer coordinator's commit and must wait for the next round.
	started bool
}

func (v *verifier) verify() error {
	v.reads.Add(1)
	v.mu.Lock()
	var r *round
	switch {
	case v.running == nil:
		r = &round{done: make(chan struct{})}
		v.running = r
		// The round starts on its own goroutine, so reads arriving
		// together (dispatched one after the other by the connection's
		// reader) join it before it starts.
		go v.run(r)
	case !v.running.started:
		r = v.running
	default:
		if v.next == nil {
			v.next = &round{done: make(chan struct{})}
		}
		r = v.next
	}
	v.mu.Unlock()
	<-r.done
	return r.err
}

func (v *verifier) run(r *round) {
	for r != nil {
		v.mu.Lock()
		r.started = true
		v.mu.Unlock()
		v.rounds.Add(1)
		r.err = v.r.VerifyLeader().Error()
		close(r.done)
		v.mu.Lock()
		r = v.next
		v.next = nil
		v.running = r
		v.mu.Unlock()
	}
}
