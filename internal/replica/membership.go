package replica

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// MembershipTimeout bounds one configuration change.
const MembershipTimeout = 30 * time.Second

// ErrNotCoordinator: membership changes are made by the coordinator.
var ErrNotCoordinator = errors.New("this replica is not the coordinator")

// AddReplica adds one voter through a Raft configuration change. The new
// replica catches up from the journal or a checkpoint plus the tail. One
// change at a time: a second call waits for the first.
func (w *Worker) AddReplica(p Peer) error {
	w.memberMu.Lock()
	defer w.memberMu.Unlock()
	if w.raft.State() != raft.Leader {
		return ErrNotCoordinator
	}
	if p.ID == "" || p.Address == "" || p.ServerName == "" {
		return fmt.Errorf("replica to add needs ID, address and server name: %+v", p)
	}
	w.peersMu.Lock()
	w.peers[raft.ServerID(p.ID)] = p
	w.peersMu.Unlock()
	if err := w.raft.AddVoter(raft.ServerID(p.ID), p.raftAddress(), 0, MembershipTimeout).Error(); err != nil {
		return fmt.Errorf("add replica %s: %w", p.ID, err)
	}
	w.log.Info("replica added", "member", p.ID)
	return nil
}

// KnowPeer records how this worker reaches p, so that a member added by
// another coordinator (a replacement) can be dialled if this worker is
// elected later. AddReplica records it only on the coordinator that ran it.
// An unchanged route is a no-op; a changed one takes effect on the next dial.
func (w *Worker) KnowPeer(p Peer) {
	if p.ID == "" || p.Address == "" || p.ServerName == "" || p.ID == w.cfg.Self.ID {
		return
	}
	w.peersMu.Lock()
	defer w.peersMu.Unlock()
	w.peers[raft.ServerID(p.ID)] = p
}

// IsCoordinator: this worker is the Raft leader now.
func (w *Worker) IsCoordinator() bool {
	r := w.shared.Load()
	return r != nil && r.State() == raft.Leader
}

// RemoveReplica removes one voter through a Raft configuration change.
func (w *Worker) RemoveReplica(id string) error {
	w.memberMu.Lock()
	defer w.memberMu.Unlock()
	if w.raft.State() != raft.Leader {
		return ErrNotCoordinator
	}
	if err := w.raft.RemoveServer(raft.ServerID(id), 0, MembershipTimeout).Error(); err != nil {
		return fmt.Errorf("remove replica %s: %w", id, err)
	}
	w.log.Info("replica removed", "member", id)
	return nil
}

// Members lists the current configuration's replica IDs.
func (w *Worker) Members() ([]string, error) {
	f := w.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range f.Configuration().Servers {
		out = append(out, string(s.ID))
	}
	return out, nil
}

// Checkpoint takes a checkpoint now.
func (w *Worker) Checkpoint() error {
	if err := w.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// Digest returns the applied command index and the state digest (see
// fsm.FSM.Digest), for divergence checks.
func (w *Worker) Digest() (uint64, string, error) { return w.fsm.Digest() }

// TransferCoordinator hands the coordinator's role to the member id
// through Raft's leadership transfer (the target is brought up to date
// first, then told to start an election). Operators use it to move the
// coordinator off a node before maintenance; the process tests use it to
// put the coordinator on a replica the mounts were never configured with.
func (w *Worker) TransferCoordinator(id string) error {
	w.memberMu.Lock()
	defer w.memberMu.Unlock()
	if w.raft.State() != raft.Leader {
		return ErrNotCoordinator
	}
	f := w.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("transfer the coordinator to %s: %w", id, err)
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			if err := w.raft.LeadershipTransferToServer(s.ID, s.Address).Error(); err != nil {
				return fmt.Errorf("transfer the coordinator to %s: %w", id, err)
			}
			w.log.Info("coordinator transferred", "to", id)
			return nil
		}
	}
	return fmt.Errorf("transfer the coordinator to %s: not a member", id)
}
