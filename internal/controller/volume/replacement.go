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
//     coordinator's host adds the voter and reports g Succeeded;
//  3. rebuild: wait until the new replica is a Ready member within
//     catchUpLag of its coordinator;
//  4. remove: spec.membership {g+1, Remove, lost}; the coordinator's host
//     removes the voter and reports g+1 Succeeded;
//  5. teardown: the lost replica is annotated with the committed removal
//     and deleted (UID precondition); its release goes through the normal
//     ordered teardown, and without the host's acknowledgement only when its
//     node is gone (it holds no vote any more and no worker can serve it).

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// loss is why a replica counts as lost, and when.
type loss struct {
	lost   bool          // replace it now
	why    string        // for messages
	waitIn time.Duration // > 0: the node is gone, replaced after this
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

// judge decides, for every member, whether it is lost, and keeps the
// unavailable-since annotations. recheck is when a live host's Lease runs
// out, the time to look again.
func (r *Reconciler) judge(ctx context.Context, set replicaSet) (map[string]loss, time.Duration, error) {
	out := map[string]loss{}
	now := time.Now()
	var recheck time.Duration
	for _, vr := range set {
		if !member(vr) {
			continue
		}
		if c := meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaStateLost.String()); c != nil && c.Status == "True" {
			out[vr.Name] = loss{lost: true, why: "it reports ReplicaStateLost: " + c.Reason}
			continue
		}
		if why, err := r.backingLost(ctx, vr); err != nil {
			return nil, 0, err
		} else if why != "" {
			out[vr.Name] = loss{lost: true, why: why}
			continue
		}
		host, err := r.hostOf(ctx, vr, now)
		if err != nil {
			return nil, 0, err
		}
		if err := r.markUnavailable(ctx, vr, host.gone, now); err != nil {
			return nil, 0, err
		}
		if host.gone == "" {
			recheck = soonest(recheck, recheckAfter(host, now))
			continue
		}
		first := unavailableSince(vr, now)
		if !host.since.IsZero() && host.since.Before(first) {
			first = host.since
		}
		if left := r.replacementDelay - now.Sub(first); left > 0 {
			out[vr.Name] = loss{why: host.gone + " since " + first.UTC().Format(time.RFC3339), waitIn: left}
		} else {
			out[vr.Name] = loss{lost: true, why: host.gone + " since " + first.UTC().Format(time.RFC3339)}
		}
	}
	return out, recheck, nil
}

// backingLost says why the replica's backing storage is gone, or "".
func (r *Reconciler) backingLost(ctx context.Context, vr *storagev1alpha1.VolumeReplica) (string, error) {
	claim := &corev1.PersistentVolumeClaim{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: vr.Spec.BackingClaimName}, claim)
	if apierrors.IsNotFound(err) {
		return "", nil // not created yet: the ensure loop creates it
	}
	if err != nil {
		return "", fmt.Errorf("read backing claim %s: %w", vr.Spec.BackingClaimName, err)
	}
	if claim.Status.Phase == corev1.ClaimLost {
		return fmt.Sprintf("its backing claim %s is Lost", claim.Name), nil
	}
	if claim.Spec.VolumeName == "" {
		return "", nil
	}
	err = r.reader.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, &corev1.PersistentVolume{})
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("the PersistentVolume %s of its backing claim %s is gone", claim.Spec.VolumeName, claim.Name), nil
	}
	if err != nil {
		return "", fmt.Errorf("read PersistentVolume %s of claim %s: %w", claim.Spec.VolumeName, claim.Name, err)
	}
	return "", nil
}

// unavailableSince is the time the annotation records, or now.
func unavailableSince(vr *storagev1alpha1.VolumeReplica, now time.Time) time.Time {
	if t, err := time.Parse(time.RFC3339, vr.Annotations[storagev1alpha1.AnnotationUnavailableSince]); err == nil {
		return t
	}
	return now
}

// markUnavailable writes or removes the unavailable-since annotation.
func (r *Reconciler) markUnavailable(ctx context.Context, vr *storagev1alpha1.VolumeReplica, gone string, now time.Time) error {
	_, has := vr.Annotations[storagev1alpha1.AnnotationUnavailableSince]
	if (gone != "") == has {
		return nil
	}
	orig := vr.DeepCopy()
	if gone != "" {
		if vr.Annotations == nil {
			vr.Annotations = map[string]string{}
		}
		vr.Annotations[storagev1alpha1.AnnotationUnavailableSince] = now.UTC().Format(time.RFC3339)
		r.log.Info("replica unavailable; replacement delay starts", "replica", vr.Name, "why", gone, "delay", r.replacementDelay)
	} else {
		delete(vr.Annotations, storagev1alpha1.AnnotationUnavailableSince)
	}
	if err := r.client.Patch(ctx, vr, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("record the availability of VolumeReplica %s: %w", vr.Name, err)
	}
	return nil
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

// continueReplacement derives the step of the replacement of old by repl
// from the objects and advances it.
func (r *Reconciler) continueReplacement(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, set *replicaSet,
	old, repl *storagev1alpha1.VolumeReplica) (replacement, error) {
	what := fmt.Sprintf("replica %s on node %s replaces %s on node %s", repl.Name, repl.Spec.Node, old.Name, old.Spec.Node)
	step := func(reason storagev1alpha1.ConditionReason, format string, args ...any) replacement {
		return replacement{active: true, reason: reason, requeue: replacementRequeue, message: what + ": " + fmt.Sprintf(format, args...)}
	}
	if gen, ok := removedGeneration(old); ok {
		waits, err := r.retire(ctx, rv, old)
		if err != nil {
			return replacement{}, err
		}
		if waits == "" {
			r.metrics.replaced(rv.Name)
			r.event(rv, eventNormal, EventReplicaReplaced, "Replace", "%s: done, the objects of %s are removed", what, old.Name)
			return replacement{reason: storagev1alpha1.ReasonNoReplacement, message: what + ": done"}, nil
		}
		return step(storagev1alpha1.ReasonRemovingObjects, "removed from the Raft configuration (membership generation %d); %s", gen, waits), nil
	}
	if abandonedWhy(repl) != "" {
		return r.abandon(ctx, rv, set, old, repl)
	}
	req := currentRequest(*set, old)
	add := storagev1alpha1.MembershipChange{Operation: storagev1alpha1.MembershipAdd, Member: r.peer(repl)}
	remove := storagev1alpha1.MembershipChange{Operation: storagev1alpha1.MembershipRemove, Member: r.peer(old)}
	var recheck time.Duration
	if req == nil || !sameChange(*req, remove) {
		// Before the lost replica's removal is asked for, the new one may
		// still be given up (stuck.go).
		why, wait, err := r.stuck(ctx, repl)
		if err != nil {
			return replacement{}, err
		}
		if why != "" {
			if err := r.markAbandoned(ctx, rv, old, repl, why); err != nil {
				return replacement{}, err
			}
			return r.abandon(ctx, rv, set, old, repl)
		}
		recheck = wait
	}
	step = func(reason storagev1alpha1.ConditionReason, format string, args ...any) replacement {
		return replacement{active: true, reason: reason, requeue: soonest(replacementRequeue, recheck),
			message: what + ": " + fmt.Sprintf(format, args...)}
	}
	switch {
	case req != nil && sameChange(*req, remove):
		if out := reportOf(*set, req); out != nil && out.Result == storagev1alpha1.MembershipSucceeded {
			if err := r.annotateRemoved(ctx, old, req.Generation); err != nil {
				return replacement{}, err
			}
			r.event(rv, eventNormal, EventReplicaRemoved, "Replace", "%s: %s removed from the Raft configuration (generation %d)", what, old.Name, req.Generation)
			return step(storagev1alpha1.ReasonRemovingObjects, "removed from the Raft configuration (membership generation %d)", req.Generation), nil
		}
		if err := r.request(ctx, *set, old, *req); err != nil {
			return replacement{}, err
		}
		return step(storagev1alpha1.ReasonRemovingReplica, "the coordinator is asked to remove %s (membership generation %d)%s",
			old.Name, req.Generation, failure(*set, req)), nil
	case req != nil && sameChange(*req, add):
		out := reportOf(*set, req)
		if out == nil || out.Result != storagev1alpha1.MembershipSucceeded {
			if err := r.request(ctx, *set, old, *req); err != nil {
				return replacement{}, err
			}
			return step(storagev1alpha1.ReasonAddingReplica, "the coordinator is asked to add %s (membership generation %d)%s",
				repl.Name, req.Generation, failure(*set, req)), nil
		}
		if !replacingReason(rv, storagev1alpha1.ReasonRebuildingReplica) && !replacingReason(rv, storagev1alpha1.ReasonRemovingReplica) {
			r.event(rv, eventNormal, EventReplicaAdded, "Replace", "%s: %s added to the Raft configuration (generation %d); it rebuilds", what, repl.Name, req.Generation)
		}
		if !readyMember(repl) || repl.Status.Lag > catchUpLag {
			return step(storagev1alpha1.ReasonRebuildingReplica, "%s is a member and rebuilds (ready %t, lag %d, applied index %d)",
				repl.Name, readyMember(repl), repl.Status.Lag, repl.Status.AppliedIndex), nil
		}
		if ok, msg := quorumWithout(replicaCount(rv), *set, old, nil); !ok {
			return step(storagev1alpha1.ReasonAwaitingQuorum, "%s caught up, but %s is not removed: %s", repl.Name, old.Name, msg), nil
		}
		remove.Generation = req.Generation + 1
		if err := r.request(ctx, *set, old, remove); err != nil {
			return replacement{}, err
		}
		return step(storagev1alpha1.ReasonRemovingReplica, "%s caught up; the coordinator is asked to remove %s (membership generation %d)",
			repl.Name, old.Name, remove.Generation), nil
	default:
		// Allocated, no request yet (or an older one of an earlier
		// replacement): ask for the add, under quorum.
		if ok, msg := quorumWithout(replicaCount(rv), *set, old, repl); !ok {
			return step(storagev1alpha1.ReasonAwaitingQuorum, "%s is not added: %s", repl.Name, msg), nil
		}
		add.Generation = maxGeneration(*set) + 1
		if err := r.request(ctx, *set, old, add); err != nil {
			return replacement{}, err
		}
		return step(storagev1alpha1.ReasonAddingReplica, "the coordinator is asked to add %s (membership generation %d)", repl.Name, add.Generation), nil
	}
}

// currentRequest is the newest membership request on the members other
// than old.
func currentRequest(set replicaSet, old *storagev1alpha1.VolumeReplica) *storagev1alpha1.MembershipChange {
	var cur *storagev1alpha1.MembershipChange
	for _, vr := range set {
		if vr.Name == old.Name || !member(vr) || vr.Spec.Membership == nil {
			continue
		}
		if cur == nil || vr.Spec.Membership.Generation > cur.Generation {
			cur = vr.Spec.Membership
		}
	}
	return cur
}

func maxGeneration(set replicaSet) int64 {
	var g int64
	for _, vr := range set {
		if vr.Spec.Membership != nil {
			g = max(g, vr.Spec.Membership.Generation)
		}
		if vr.Status.Membership != nil {
			g = max(g, vr.Status.Membership.Generation)
		}
	}
	return g
}

func sameChange(a, b storagev1alpha1.MembershipChange) bool {
	return a.Operation == b.Operation && a.Member.Name == b.Member.Name
}

// reportOf is a host's report of req, if any host reported it.
func reportOf(set replicaSet, req *storagev1alpha1.MembershipChange) *storagev1alpha1.MembershipOutcome {
	var found *storagev1alpha1.MembershipOutcome
	for _, vr := range set {
		o := vr.Status.Membership
		if o == nil || o.Generation != req.Generation || o.Operation != req.Operation || o.Member != req.Member.Name {
			continue
		}
		if o.Result == storagev1alpha1.MembershipSucceeded {
			return o
		}
		found = o
	}
	return found
}

// failure is the last reported failure of req, for the condition message.
func failure(set replicaSet, req *storagev1alpha1.MembershipChange) string {
	if o := reportOf(set, req); o != nil && o.Result == storagev1alpha1.MembershipFailed {
		return "; the last attempt failed: " + o.Message
	}
	return ""
}

// request writes change on every member but old (whose host is gone or has
// lost its state, so it never coordinates) where it differs.
func (r *Reconciler) request(ctx context.Context, set replicaSet, old *storagev1alpha1.VolumeReplica, change storagev1alpha1.MembershipChange) error {
	for _, vr := range set {
		if vr.Name == old.Name || !member(vr) {
			continue
		}
		if vr.Spec.Membership != nil && *vr.Spec.Membership == change {
			continue
		}
		orig := vr.DeepCopy()
		c := change
		vr.Spec.Membership = &c
		if err := r.client.Patch(ctx, vr, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("request membership generation %d (%s %s) on VolumeReplica %s: %w",
				change.Generation, change.Operation, change.Member.Name, vr.Name, err)
		}
	}
	return nil
}

func replacingReason(rv *storagev1alpha1.ReplicatedVolume, reason storagev1alpha1.ConditionReason) bool {
	c := meta.FindStatusCondition(rv.Status.Conditions, storagev1alpha1.VolumeReplacing.String())
	return c != nil && c.Reason == reason.String()
}

// removedGeneration is the committed removal recorded on old.
func removedGeneration(vr *storagev1alpha1.VolumeReplica) (int64, bool) {
	v, ok := vr.Annotations[storagev1alpha1.AnnotationMembershipRemoved]
	if !ok {
		return 0, false
	}
	g, err := strconv.ParseInt(v, 10, 64)
	return g, err == nil
}

// annotateRemoved records the committed removal on old before anything of
// it is deleted: the record is what allows a release without its host.
func (r *Reconciler) annotateRemoved(ctx context.Context, old *storagev1alpha1.VolumeReplica, gen int64) error {
	orig := old.DeepCopy()
	if old.Annotations == nil {
		old.Annotations = map[string]string{}
	}
	old.Annotations[storagev1alpha1.AnnotationMembershipRemoved] = strconv.FormatInt(gen, 10)
	if err := r.client.Patch(ctx, old, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("record the committed removal of VolumeReplica %s: %w", old.Name, err)
	}
	return nil
}

// retire deletes the replaced replica (UID precondition) and advances its
// ordered teardown; it returns what it waits for, "" once it is gone.
func (r *Reconciler) retire(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, old *storagev1alpha1.VolumeReplica) (string, error) {
	host, err := r.hostOf(ctx, old, time.Now())
	if err != nil {
		return "", err
	}
	return r.releaseReplica(ctx, rv, old, host.gone != "")
}
