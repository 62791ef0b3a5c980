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

// CaughtUpEntries is how far behind the coordinator's last index a
// non-voter may be when it is promoted to voter.
const CaughtUpEntries = 64

// ErrCatchingUp: the replica being added is a non-voter that has not caught
// up yet; ask again later (nothing is undone).
var ErrCatchingUp = errors.New("the new replica catches up as a non-voter before it votes")

// AddReplica adds one voter through Raft configuration changes, in two
// stages: first as a non-voter, which receives the journal (or a
// checkpoint and the tail) without counting for quorum, then, once it is
// within CaughtUpEntries of the coordinator's last index, promoted to
// voter. Adding a voter at once would make a configuration whose quorum
// needs the new replica before it holds the journal: with one member lost
// (the reason to add one), every commit would wait for its whole rebuild.
//
// AddReplica waits up to catchUp for the catch-up; past it, it returns
// ErrCatchingUp and the non-voter stays, so the next call continues where
// this one stopped. A replica that already votes is added already. One
// change at a time: a second call waits for the first.
func (w *Worker) AddReplica(p Peer, catchUp time.Duration) error {
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
	id := raft.ServerID(p.ID)
	suffrage, present, err := w.suffrage(id)
	switch {
	case err != nil:
		return fmt.Errorf("add replica %s: read the configuration: %w", p.ID, err)
	case present && suffrage == raft.Voter:
		return nil
	case !present:
		if err := w.raft.AddNonvoter(id, p.raftAddress(), 0, MembershipTimeout).Error(); err != nil {
			return fmt.Errorf("add replica %s as a non-voter: %w", p.ID, err)
		}
		w.log.Info("replica added as a non-voter; it votes once caught up", "member", p.ID)
	}
	if err := w.awaitCaughtUp(id, catchUp); err != nil {
		return fmt.Errorf("add replica %s: %w", p.ID, err)
	}
	if err := w.raft.AddVoter(id, p.raftAddress(), 0, MembershipTimeout).Error(); err != nil {
		return fmt.Errorf("promote replica %s to voter: %w", p.ID, err)
	}
	w.log.Info("replica added", "member", p.ID)
	return nil
}

// suffrage is id's suffrage in the current configuration.
func (w *Worker) suffrage(id raft.ServerID) (raft.ServerSuffrage, bool, error) {
	f := w.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return 0, false, err
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == id {
			return s.Suffrage, true, nil
		}
	}
	return 0, false, nil
}

// awaitCaughtUp waits until the coordinator has seen id acknowledge entries
// within CaughtUpEntries of its last index, for at most d. An
// acknowledgement is required whatever the distance: on a journal shorter
// than CaughtUpEntries a replica that never answered (not running at all)
// would otherwise count as caught up and be promoted, and with a member
// lost its vote would then be needed for every commit.
func (w *Worker) awaitCaughtUp(id raft.ServerID, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		last, term := w.raft.LastIndex(), w.raft.CurrentTerm()
		m := w.progress.of(id, term)
		if m > 0 && m+CaughtUpEntries >= last {
			return nil
		}
		if w.raft.State() != raft.Leader {
			return ErrNotCoordinator
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: acknowledged index %d, %d entries behind the coordinator's %d", ErrCatchingUp, m, last-m, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
