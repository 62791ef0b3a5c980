package fsm

// Fencing: one writer at a time on a single-writer volume
// (docs/replica-engine.md, "Fencing").
//
// A single-writer mount opens a fencing epoch with a KindFence entry before
// it serves anything: applying it raises the volume's epoch by one and
// returns the new value, so epochs are issued in log order, each once, and
// the newest mount session holds the highest. Every later operation of that
// mount carries its epoch. Applying a mutation whose epoch is below the
// volume's current one refuses it with ErrnoFenced: the decision is a
// function of the entry and the state before it, so a mutation ordered after
// a newer epoch's entry is refused on every replica and on every replay.
// The coordinator's read path refuses queries the same way, after it has
// verified its authority and applied everything committed before the read
// (serve.go), so a fenced mount reads nothing once the newer epoch has
// committed.
//
// The epoch is part of the replicated state: checkpointed with it and
// covered by the digest, so it survives restarts and a replica rebuilt from a
// checkpoint fences the same sessions. KindFence itself goes through the
// exactly-once table like any mutation, so a retried open returns the epoch
// it was given the first time instead of opening another.
//
// Operations with epoch 0 (multi-writer mounts, tools) are never fenced.

import "github.com/cellfleet/cellfleet/internal/replica/wire"

// openFence issues the volume's next fencing epoch.
func (f *FSM) openFence() wire.Result {
	f.st.Fence++
	f.log.Info("fencing epoch opened; older single-writer sessions are fenced", "epoch", f.st.Fence)
	return wire.Result{N: f.st.Fence}
}

// superseded reports whether an operation of the given epoch belongs to a
// mount session a newer one has fenced.
func (s *state) superseded(epoch uint64) bool { return epoch != 0 && epoch < s.Fence }

// Fenced reports whether the applied state fences an operation of this
// epoch: the read path's check, under the same lock as the query it guards.
func (f *FSM) Fenced(epoch uint64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.superseded(epoch)
}

// FenceEpoch returns the volume's newest fencing epoch.
func (f *FSM) FenceEpoch() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Fence
}
