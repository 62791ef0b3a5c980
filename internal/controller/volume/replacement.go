package volume

// Replacing a permanently lost replica (docs/decisions/0006-replica-replacement.md,
// with the liveness of docs/decisions/0011-node-leases.md).
//
// A replica is lost when
//   - its host reports ReplicaStateLost (at once: it is never initialised
//     again in place),
//   - its backing claim is Lost or the claim's PersistentVolume is gone (at
//     once), or
//   - its host is gone (the Node absent, or the host's Lease absent or
//     expired: liveness.go) for the replacement delay, counted from the
//     earlier of the Lease's expiry and the annotation the controller
//     writes when it first sees that, so a restarted manager does not start
//     the delay afresh. A host that renews its Lease is never gone: a sick
//     worker or a long rebuild is judged on its own replica's status only.
// One replacement at a time per volume, at most --max-concurrent-replacements
// across the cluster (bound.go), only while the other replicas hold a
// healthy quorum, onto an eligible node the volume does not use. The steps
// are level-triggered: every reconcile derives the step from the objects
// alone, so a manager that stops anywhere resumes where it was.
//  1. allocate: a new VolumeReplica at the next unused index with
//     spec.replaces naming the lost one, a port from the node's book; its
//     claim, Service and Secret follow in the same reconcile's ensure loop;
//  2. add: spec.membership {generation g, Add, new} on every member; the
//     coordinator's host adds it (a non-voter until it catches up) and
//     reports g Succeeded;
//  3. rebuild: wait until the new replica is a Ready member within
//     catchUpLag of its coordinator;
//  4. remove: spec.membership {g+1, Remove, lost}; the coordinator's host
//     removes the voter and reports g+1 Succeeded;
//  5. teardown: the lost replica is annotated with the committed removal
//     and deleted (UID precondition); its release goes through the normal
//     ordered teardown, and without the host's acknowledgement only when its
//     node is gone (it holds no vote any more and no worker can serve it).
//
// This file picks the lost replica to replace and allocates its successor
// (step 1); replacement_loss.go judges what is lost, replacement_steps.go
// advances steps 2 to 5, and replacement_membership.go reads and writes the
// membership requests.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// catchUpLag is how far behind its coordinator (journal entries, as its host
// reports) a new replica may be for the lost one to be removed: the removal
// must not leave a configuration whose quorum depends on a member still
// rebuilding.
const catchUpLag = 64

// replacementRequeue paces a replacement in progress: the hosts' status
// writes wake the controller too, this only bounds a missed event.
const replacementRequeue = 5 * time.Second

// Events of a replacement.
const (
	EventReplacementStarted EventReason = "ReplicaReplacementStarted"
	EventReplicaAdded       EventReason = "ReplicaAdded"
	EventReplicaRemoved     EventReason = "ReplicaRemoved"
	EventReplicaReplaced    EventReason = "ReplicaReplaced"
	EventReplacementWaiting EventReason = "ReplicaReplacementWaiting"
)

// replacement is what one reconcile found of the volume's replacement, for
// the Replacing condition.
type replacement struct {
	active  bool
	reason  storagev1alpha1.ConditionReason
	message string
	requeue time.Duration
}

// replace advances the volume's replacement by one step where it can.
func (r *Reconciler) replace(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, set *replicaSet) (replacement, error) {
	if old, repl := inProgress(*set); repl != nil {
		return r.continueReplacement(ctx, rv, set, old, repl)
	}
	losses, recheck, err := r.judge(ctx, *set)
	if err != nil {
		return replacement{}, err
	}
	var lost *storagev1alpha1.VolumeReplica
	var waiting []string
	var nearest time.Duration
	for _, vr := range *set {
		l, ok := losses[vr.Name]
		switch {
		case !ok:
		case l.lost && lost == nil:
			lost = vr
		case l.waitIn > 0:
			waiting = append(waiting, fmt.Sprintf("%s (%s; replaced in %s)", vr.Name, l.why, l.waitIn.Round(time.Second)))
			if nearest == 0 || l.waitIn < nearest {
				nearest = l.waitIn
			}
		}
	}
	if lost == nil {
		if len(waiting) > 0 {
			return replacement{reason: storagev1alpha1.ReasonAwaitingDelay, requeue: soonest(nearest, recheck),
				message: fmt.Sprintf("host gone, within --replica-replacement-delay=%s: %s", r.replacementDelay, strings.Join(waiting, ", "))}, nil
		}
		return replacement{reason: storagev1alpha1.ReasonNoReplacement, requeue: recheck, message: "no replica is lost"}, nil
	}
	why := losses[lost.Name].why
	if ok, msg := quorumWithout(replicaCount(rv), *set, lost, nil); !ok {
		r.event(rv, eventWarning, EventReplacementWaiting, "Replace", "replica %s is lost (%s) but %s", lost.Name, why, msg)
		return replacement{reason: storagev1alpha1.ReasonAwaitingQuorum, requeue: pendingRequeue,
			message: fmt.Sprintf("replica %s is lost (%s); not replaced: %s", lost.Name, why, msg)}, nil
	}
	return r.allocate(ctx, rv, set, lost, why)
}

// inProgress finds a replacement whose lost replica still exists. An
// abandoned replacement (stuck.go) stays in progress until it is gone, its
// teardown included: the next one waits for it.
func inProgress(set replicaSet) (old, repl *storagev1alpha1.VolumeReplica) {
	for _, vr := range set {
		if vr.Spec.Replaces == "" || vr.DeletionTimestamp != nil && abandonedWhy(vr) == "" {
			continue
		}
		if o := set.find(vr.Spec.Replaces); o != nil {
			return o, vr
		}
	}
	return nil, nil
}

// readyMember: the host reports the replica a Ready voting member with its
// state intact (the same rule as the volume's health).
func readyMember(vr *storagev1alpha1.VolumeReplica) bool {
	st := vr.Status
	_, hostGone := vr.Annotations[storagev1alpha1.AnnotationUnavailableSince]
	return member(vr) && !hostGone && meta.IsStatusConditionTrue(st.Conditions, storagev1alpha1.ReplicaReady.String()) &&
		!meta.IsStatusConditionTrue(st.Conditions, storagev1alpha1.ReplicaStateLost.String()) &&
		(st.Role == storagev1alpha1.RoleCoordinator || st.Role == storagev1alpha1.RoleFollower)
}

// quorumWithout: the members other than lost hold a healthy quorum of the
// configuration a membership change starts from (every member, lost
// included, but not notYet: a replacement the coordinator has not added),
// one of them the coordinator.
func quorumWithout(want int, set replicaSet, lost, notYet *storagev1alpha1.VolumeReplica) (bool, string) {
	members, ready, coordinator := 0, 0, false
	var down []string
	for _, vr := range set {
		if !member(vr) || notYet != nil && vr.Name == notYet.Name {
			continue
		}
		members++
		if vr.Name == lost.Name {
			continue
		}
		if readyMember(vr) {
			ready++
			coordinator = coordinator || vr.Status.Role == storagev1alpha1.RoleCoordinator
		} else {
			down = append(down, vr.Name)
		}
	}
	members = max(members, want)
	quorum := members/2 + 1
	switch {
	case ready < quorum:
		return false, fmt.Sprintf("only %d of the other replicas are ready members, a quorum of %d members needs %d (not ready: %s)",
			ready, members, quorum, strings.Join(down, ", "))
	case !coordinator:
		return false, "no other replica reports itself coordinator"
	}
	return true, ""
}

// allocate creates the replacement of lost on an eligible node the volume
// does not use. The volume's replicas are read again from the API server
// under the port lock: a cache that has not seen the last create must not
// let a second replacement be allocated.
func (r *Reconciler) allocate(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, set *replicaSet,
	lost *storagev1alpha1.VolumeReplica, why string) (replacement, error) {
	elig, err := r.findEligible(ctx)
	if err != nil {
		return replacement{}, err
	}
	r.portMu.Lock()
	defer r.portMu.Unlock()
	fresh, err := r.listReplicasFrom(ctx, r.reader, rv)
	if err != nil {
		return replacement{}, err
	}
	if old, repl := inProgress(fresh); repl != nil {
		*set = fresh
		return r.continueReplacement(ctx, rv, set, old, repl)
	}
	all, err := r.readAllReplicas(ctx)
	if err != nil {
		return replacement{}, err
	}
	if busy := r.slotTaken(all); busy != "" {
		msg := fmt.Sprintf("replica %s is lost (%s); not replaced yet: %s", lost.Name, why, busy)
		r.event(rv, eventNormal, EventReplacementWaiting, "Replace", "%s", msg)
		return replacement{reason: storagev1alpha1.ReasonAwaitingReplacementSlot, message: msg, requeue: pendingRequeue}, nil
	}
	book := newPortBook(all)
	taken := map[string]string{}
	zoneOf := map[string]string{}
	for _, c := range elig.eligible {
		zoneOf[c.name] = c.zone
	}
	for _, vr := range fresh {
		if member(vr) && vr.Name != lost.Name {
			taken[vr.Spec.Node] = zoneOf[vr.Spec.Node]
		}
	}
	// The lost replica's node is excluded too, without counting its zone:
	// the replacement should take the lost one's place in the spread.
	for _, vr := range fresh {
		if vr.Name == lost.Name {
			delete(zoneOf, vr.Spec.Node)
		}
	}
	pool := make([]candidate, 0, len(elig.eligible))
	excluded := excludedNodes(lost)
	for _, c := range elig.eligible {
		if c.name != lost.Spec.Node && !slices.Contains(excluded, c.name) {
			pool = append(pool, c)
		}
	}
	chosen := choose(pool, taken, book.load(), 1)
	if chosen == nil {
		msg := fmt.Sprintf("replica %s is lost (%s); no eligible node outside the volume's: %s", lost.Name, why, elig.message(len(taken)+1))
		r.event(rv, eventWarning, EventReplacementWaiting, "Replace", "%s", msg)
		return replacement{reason: storagev1alpha1.ReasonAwaitingNode, message: msg, requeue: pendingRequeue}, nil
	}
	port, err := book.next(chosen[0].name, r.ports)
	if err != nil {
		return replacement{}, err
	}
	vr := r.newReplica(rv, max(fresh.maxIndex(rv.Name), abandonedIndex(rv.Name, lost))+1, chosen[0].name, port)
	vr.Spec.Replaces = lost.Name
	*set = append(fresh, vr)
	set.sort(rv.Name)
	vr.Spec.Peers = r.peersOf(*set, vr)
	if err := r.client.Create(ctx, vr); err != nil {
		return replacement{}, fmt.Errorf("create replacement VolumeReplica %s for %s on %s port %d: %w", vr.Name, lost.Name, vr.Spec.Node, vr.Spec.Port, err)
	}
	r.event(rv, eventNormal, EventReplacementStarted, "Replace", "replica %s is lost (%s): replica %s allocated on node %s, port %d, to replace it",
		lost.Name, why, vr.Name, vr.Spec.Node, vr.Spec.Port)
	r.log.Info("replacement allocated", "volume", rv.Name, "lost", lost.Name, "why", why, "replica", vr.Name, "node", vr.Spec.Node, "port", vr.Spec.Port)
	return replacement{active: true, reason: storagev1alpha1.ReasonAddingReplica, requeue: replacementRequeue,
		message: fmt.Sprintf("replica %s on node %s replaces %s (%s): allocated", vr.Name, vr.Spec.Node, lost.Name, why)}, nil
}
