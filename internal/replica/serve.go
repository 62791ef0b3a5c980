package replica

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// ReadTimeout bounds how long a read waits for the applied index.
const ReadTimeout = 5 * time.Second

// serve is the RPC handler: one call, all queries or all mutations.
func (w *Worker) serve(ctx context.Context, call *wire.Call) wire.Reply {
	if st, _ := w.State(); st != ReplicaStateRunning {
		return wire.Reply{Status: wire.StatusUnavailable, Message: fmt.Sprintf("replica is %s", st)}
	}
	if call.Ops[0].Kind == wire.KindFetchChunk {
		return w.serveChunk(call.Ops)
	}
	if call.Ops[0].Kind.Mutates() {
		return w.propose(call)
	}
	return w.query(ctx, &call.Ops[0])
}

func (w *Worker) notCoordinator() wire.Reply {
	addr, id := w.raft.LeaderWithID()
	rep := wire.Reply{Status: wire.StatusNotCoordinator, LeaderID: string(id),
		Message: fmt.Sprintf("replica %s is not the coordinator", w.cfg.Replica)}
	if id == raft.ServerID(w.cfg.Replica) {
		// Leader, but not yet serving this term: ask again shortly.
		rep.Status, rep.LeaderID = wire.StatusUnavailable, ""
		rep.Message = "coordinator is establishing its term"
		return rep
	}
	if san, dial, ok := splitAddress(addr); ok {
		// The Raft address carries the coordinator's server name, so a
		// client can follow a coordinator it was not configured with
		// (a replaced replica) and still verify it (wire/hint.go).
		rep.LeaderAddr, rep.LeaderServerName = dial, san
	}
	return rep
}

func (w *Worker) propose(call *wire.Call) wire.Reply {
	ops := call.Ops
	if err := validateMutations(ops); err != nil {
		return wire.Reply{Status: wire.StatusBadRequest, Message: err.Error()}
	}
	start := time.Now()
	w.propMu.Lock()
	l := w.lead.Load()
	if l == nil {
		w.propMu.Unlock()
		return w.notCoordinator()
	}
	if err := l.stampInos(ops); err != nil {
		w.propMu.Unlock()
		return wire.Reply{Status: wire.StatusBadRequest, Message: err.Error()}
	}
	// Allocation and enqueue happen under one lock so entries reach the log
	// in allocation order.
	data, ok := wire.EntryInPlace(call, start.UnixNano())
	if !ok {
		data = wire.EncodeEntry(&wire.Entry{Time: start.UnixNano(), Ops: ops})
	}
	release, err := w.admit(len(data))
	if err != nil {
		w.propMu.Unlock()
		return wire.Reply{Status: wire.StatusUnavailable, Message: err.Error()}
	}
	fut := w.raft.Apply(data, w.cfg.ApplyTimeout)
	w.propMu.Unlock()
	err = fut.Error()
	release()
	switch {
	case err == nil:
	case errors.Is(err, raft.ErrNotLeader):
		return w.notCoordinator()
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return wire.Reply{Status: wire.StatusUnavailable, Message: "proposal queue full"}
	default:
		// ErrLeadershipLost, ErrRaftShutdown: the entry may still commit
		// under the next coordinator.
		return wire.Reply{Status: wire.StatusUncertain, Message: err.Error()}
	}
	if w.cfg.Observer != nil {
		w.cfg.Observer.CommitLatency(w.cfg.Volume, w.cfg.Replica, time.Since(start))
	}
	if err := w.fsm.Failed(); err != nil {
		// The entry committed but this replica could not apply it: its
		// results are not the group's, and the replica is stopping. The
		// client retries under the same session and learns the committed
		// outcome from the next coordinator.
		return wire.Reply{Status: wire.StatusUncertain,
			Message: fmt.Sprintf("entry committed but this replica could not apply it: %v", err)}
	}
	results, ok := fut.Response().([]wire.Result)
	if !ok {
		return wire.Reply{Status: wire.StatusBadRequest, Message: fmt.Sprintf("entry rejected: %v", fut.Response())}
	}
	rep := replyFor(results)
	if rep.Status == wire.StatusFenced {
		return w.fenced(FencedMutation, ops[0].Epoch)
	}
	return rep
}

// fenced reports a call refused for its superseded fencing epoch.
func (w *Worker) fenced(kind FencedKind, epoch uint64) wire.Reply {
	w.log.Warn("refused a call of a fenced single-writer mount session", "path", kind, "epoch", epoch,
		"fence", w.fsm.FenceEpoch())
	if w.cfg.Observer != nil {
		w.cfg.Observer.Fenced(w.cfg.Volume, w.cfg.Replica, kind)
	}
	return fencedReply()
}

// replyFor turns the worker-internal errnos into a call status.
func replyFor(results []wire.Result) wire.Reply {
	for _, r := range results {
		switch r.Errno {
		case wire.ErrnoSessionExpired:
			return wire.Reply{Status: wire.StatusSessionExpired,
				Message: "exactly-once session not registered or evicted; nothing applied"}
		case wire.ErrnoStaleSequence:
			return wire.Reply{Status: wire.StatusBadRequest, Message: "sequence below the session's acknowledged floor"}
		case wire.ErrnoWindowFull:
			return wire.Reply{Status: wire.StatusBadRequest, Message: "too many unacknowledged operations in the session"}
		case wire.ErrnoFenced:
			return fencedReply()
		}
	}
	return wire.Reply{Status: wire.StatusOK, Results: results}
}

func fencedReply() wire.Reply {
	return wire.Reply{Status: wire.StatusFenced,
		Message: "fencing epoch superseded by a newer single-writer mount of the volume; nothing applied or read"}
}

func validateMutations(ops []wire.Op) error {
	total := 0
	for i := range ops {
		total += len(ops[i].Data)
		if ops[i].Kind != wire.KindRegister && ops[i].Session == 0 {
			return fmt.Errorf("operation %d (%s) carries no session", i, ops[i].Kind)
		}
		if ops[i].Kind == wire.KindReserveInos && (ops[i].Size == 0 || ops[i].Size > wire.MaxReserveInos) {
			return fmt.Errorf("operation %d reserves %d inode numbers, want 1 to %d", i, ops[i].Size, wire.MaxReserveInos)
		}
	}
	if total > wire.MaxData {
		return fmt.Errorf("call carries %d data bytes, limit %d", total, wire.MaxData)
	}
	return nil
}

func (w *Worker) query(ctx context.Context, op *wire.Op) wire.Reply {
	l := w.lead.Load()
	if l == nil {
		return w.notCoordinator()
	}
	seen := w.raft.CommitIndex()
	if err := w.verify.verify(); err != nil || w.lead.Load() != l {
		w.lead.CompareAndSwap(l, nil)
		return w.notCoordinator()
	}
	if seen > l.barrier {
		ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
		defer cancel()
		if err := w.fsm.WaitApplied(ctx, seen); err != nil {
			return wire.Reply{Status: wire.StatusUnavailable, Message: err.Error()}
		}
	}
	// Fencing is part of the read's authority: with everything committed
	// before the read applied, a newer single-writer session's epoch is
	// visible here.
	if w.fsm.Fenced(op.Epoch) {
		return w.fenced(FencedRead, op.Epoch)
	}
	r := w.fsm.Query(op)
	if r.Errno == uint32(syscall.EIO) && w.fsm.Failed() != nil {
		return wire.Reply{Status: wire.StatusUnavailable, Message: "replica state machine failed"}
	}
	return wire.Reply{Status: wire.StatusOK, Results: []wire.Result{r}}
}
