package replica

import (
	"sync"

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

// verifier coalesces leadership checks: every read waits for a check that
// started after the read arrived, and concurrent reads share one.
type verifier struct {
	r       *raft.Raft
	mu      sync.Mutex
	running *round
	next    *round
}

type round struct {
	done chan struct{}
	err  error
}

func (v *verifier) verify() error {
	v.mu.Lock()
	if v.running == nil {
		r := &round{done: make(chan struct{})}
		v.running = r
		v.mu.Unlock()
		go v.run(r)
		<-r.done
		return r.err
	}
	if v.next == nil {
		v.next = &round{done: make(chan struct{})}
	}
	r := v.next
	v.mu.Unlock()
	<-r.done
	return r.err
}

func (v *verifier) run(r *round) {
	for r != nil {
		r.err = v.r.VerifyLeader().Error()
		close(r.done)
		v.mu.Lock()
		r = v.next
		v.next = nil
		v.running = r
		v.mu.Unlock()
	}
}
