package volume

// The steps of a replacement in progress (docs/decisions/0006-replica-replacement.md,
// "Protocol"). Each reconcile derives the step from the objects alone: the
// lost replica's membership-removed record, the newest membership request on
// the other members and the hosts' reports of it. So one function per step,
// each of which may be entered by a manager that has just restarted, and each
// of which only asks for what the objects show is still missing.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// inFlight is the replacement of old by repl as one reconcile sees it.
type inFlight struct {
	rv        *storagev1alpha1.ReplicatedVolume
	set       replicaSet
	old, repl *storagev1alpha1.VolumeReplica
	what      string        // names both replicas and nodes, the start of every message
	recheck   time.Duration // when stuck.go must look at repl again; 0: no deadline
}

// progress reports the replacement active at reason. The requeue is the
// sooner of the usual pace and repl's next stuck.go deadline, so a rebuild
// that times out is noticed without waiting for an event.
func (f *inFlight) progress(reason storagev1alpha1.ConditionReason, format string, args ...any) replacement {
	return replacement{active: true, reason: reason, requeue: soonest(replacementRequeue, f.recheck),
		message: f.what + ": " + fmt.Sprintf(format, args...)}
}

// addition and removal are the two membership changes of the replacement;
// their generations are set when they are asked for.
func (r *Reconciler) addition(f *inFlight) storagev1alpha1.MembershipChange {
	return storagev1alpha1.MembershipChange{Operation: storagev1alpha1.MembershipAdd, Member: r.peer(f.repl)}
}

func (r *Reconciler) removal(f *inFlight) storagev1alpha1.MembershipChange {
	return storagev1alpha1.MembershipChange{Operation: storagev1alpha1.MembershipRemove, Member: r.peer(f.old)}
}

// continueReplacement derives the step of the replacement of old by repl
// from the objects and advances it.
func (r *Reconciler) continueReplacement(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, set *replicaSet,
	old, repl *storagev1alpha1.VolumeReplica) (replacement, error) {
	f := &inFlight{rv: rv, old: old, repl: repl,
		what: fmt.Sprintf("replica %s on node %s replaces %s on node %s", repl.Name, repl.Spec.Node, old.Name, old.Spec.Node)}
	if gen, ok := removedGeneration(old); ok {
		return r.retireLost(ctx, f, gen)
	}
	if abandonedWhy(repl) != "" {
		return r.abandon(ctx, rv, set, old, repl)
	}
	req := currentRequest(*set, old)
	removing := req != nil && sameChange(*req, r.removal(f))
	if !removing {
		// Until the lost replica's removal is asked for, the new one may
		// still be given up (stuck.go); once it is, the new replica is a
		// caught-up voter the configuration relies on
		// (docs/volume-controller.md, "A replacement that cannot finish").
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
		f.recheck = wait
	}
	f.set = *set
	switch {
	case removing:
		return r.awaitRemoval(ctx, f, req)
	case req != nil && sameChange(*req, r.addition(f)):
		if out := reportOf(f.set, req); out == nil || out.Result != storagev1alpha1.MembershipSucceeded {
			return r.awaitAddition(ctx, f, req)
		}
		return r.rebuild(ctx, f, req)
	default:
		// Allocated, no request yet (or an older one of an earlier
		// replacement).
		return r.requestAddition(ctx, f)
	}
}

// requestAddition is step 2: ask for repl's addition at a generation above
// every one any replica carries, under quorum, because the change starts
// from a configuration that still counts the lost replica.
func (r *Reconciler) requestAddition(ctx context.Context, f *inFlight) (replacement, error) {
	if ok, msg := quorumWithout(replicaCount(f.rv), f.set, f.old, f.repl); !ok {
		return f.progress(storagev1alpha1.ReasonAwaitingQuorum, "%s is not added: %s", f.repl.Name, msg), nil
	}
	add := r.addition(f)
	add.Generation = maxGeneration(f.set) + 1
	if err := r.request(ctx, f.set, f.old, add); err != nil {
		return replacement{}, err
	}
	return f.progress(storagev1alpha1.ReasonAddingReplica, "the coordinator is asked to add %s (membership generation %d)",
		f.repl.Name, add.Generation), nil
}

// awaitAddition is step 2 until a host reports the addition committed. The
// request is written again where a member lacks it: a manager that stopped
// after writing it on some members only finishes the write here.
func (r *Reconciler) awaitAddition(ctx context.Context, f *inFlight, req *storagev1alpha1.MembershipChange) (replacement, error) {
	if err := r.request(ctx, f.set, f.old, *req); err != nil {
		return replacement{}, err
	}
	return f.progress(storagev1alpha1.ReasonAddingReplica, "the coordinator is asked to add %s (membership generation %d)%s",
		f.repl.Name, req.Generation, failure(f.set, req)), nil
}

// rebuild is step 3, and asks for step 4 once repl caught up: the lost
// replica is removed only when the configuration left behind does not need
// a member still rebuilding for its quorum.
func (r *Reconciler) rebuild(ctx context.Context, f *inFlight, req *storagev1alpha1.MembershipChange) (replacement, error) {
	// The condition's last reason tells whether this addition was already
	// announced: the event is sent once, not on every pass of the rebuild.
	if !replacingReason(f.rv, storagev1alpha1.ReasonRebuildingReplica) && !replacingReason(f.rv, storagev1alpha1.ReasonRemovingReplica) {
		r.event(f.rv, eventNormal, EventReplicaAdded, "Replace", "%s: %s added to the Raft configuration (generation %d); it rebuilds",
			f.what, f.repl.Name, req.Generation)
	}
	if !readyMember(f.repl) || f.repl.Status.Lag > catchUpLag {
		return f.progress(storagev1alpha1.ReasonRebuildingReplica, "%s is a member and rebuilds (ready %t, lag %d, applied index %d)",
			f.repl.Name, readyMember(f.repl), f.repl.Status.Lag, f.repl.Status.AppliedIndex), nil
	}
	if ok, msg := quorumWithout(replicaCount(f.rv), f.set, f.old, nil); !ok {
		return f.progress(storagev1alpha1.ReasonAwaitingQuorum, "%s caught up, but %s is not removed: %s", f.repl.Name, f.old.Name, msg), nil
	}
	remove := r.removal(f)
	remove.Generation = req.Generation + 1
	if err := r.request(ctx, f.set, f.old, remove); err != nil {
		return replacement{}, err
	}
	return f.progress(storagev1alpha1.ReasonRemovingReplica, "%s caught up; the coordinator is asked to remove %s (membership generation %d)",
		f.repl.Name, f.old.Name, remove.Generation), nil
}

// awaitRemoval is step 4: once a host reports the removal committed, it is
// recorded on the lost replica, which starts step 5; until then the request
// is written again, as in awaitAddition.
func (r *Reconciler) awaitRemoval(ctx context.Context, f *inFlight, req *storagev1alpha1.MembershipChange) (replacement, error) {
	if out := reportOf(f.set, req); out != nil && out.Result == storagev1alpha1.MembershipSucceeded {
		if err := r.annotateRemoved(ctx, f.old, req.Generation); err != nil {
			return replacement{}, err
		}
		r.event(f.rv, eventNormal, EventReplicaRemoved, "Replace", "%s: %s removed from the Raft configuration (generation %d)",
			f.what, f.old.Name, req.Generation)
		return f.progress(storagev1alpha1.ReasonRemovingObjects, "removed from the Raft configuration (membership generation %d)", req.Generation), nil
	}
	if err := r.request(ctx, f.set, f.old, *req); err != nil {
		return replacement{}, err
	}
	return f.progress(storagev1alpha1.ReasonRemovingReplica, "the coordinator is asked to remove %s (membership generation %d)%s",
		f.old.Name, req.Generation, failure(f.set, req)), nil
}

// retireLost is step 5: the lost replica's removal committed at generation
// gen, so its objects are torn down; the replacement is done once it is gone.
func (r *Reconciler) retireLost(ctx context.Context, f *inFlight, gen int64) (replacement, error) {
	waits, err := r.retire(ctx, f.rv, f.old)
	if err != nil {
		return replacement{}, err
	}
	if waits == "" {
		r.metrics.replaced(f.rv.Name)
		r.event(f.rv, eventNormal, EventReplicaReplaced, "Replace", "%s: done, the objects of %s are removed", f.what, f.old.Name)
		return replacement{reason: storagev1alpha1.ReasonNoReplacement, message: f.what + ": done"}, nil
	}
	return f.progress(storagev1alpha1.ReasonRemovingObjects, "removed from the Raft configuration (membership generation %d); %s", gen, waits), nil
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
