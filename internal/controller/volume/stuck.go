package volume

// A replacement that cannot finish (docs/volume-controller.md, "A replacement
// that cannot finish"; decision 0006). The replica being added may never
// catch up: its node goes away too, it reports ReplicaStateLost, its backing
// claim is lost, or it stays behind past --replica-rebuild-timeout. Waiting
// for it would leave the volume Degraded for good, so the controller abandons
// it, one step per reconcile, each derived from the objects alone:
//  1. mark: the half-added replica is annotated with why it is abandoned
//     and recorded, with its node, on the lost replica, so the next attempt
//     goes to another node and takes an index above it (a name, hence a
//     Raft server ID, is never used twice) (event ReplicaReplacementAbandoned);
//  2. remove: if its addition was ever requested, the coordinator's host is
//     asked to remove it from the Raft configuration (a non-voter's removal
//     leaves the quorum as it is; a promoted voter is removed only under
//     the quorum rule of every membership change); a replica never asked to
//     be added holds nothing and skips this;
//  3. retire: the committed removal is recorded on it and it is torn down
//     like a replaced replica (UID preconditions; the host's release
//     acknowledgement is waived only when its node is gone);
//  4. once it is gone the lost replica is judged again and a replacement is
//     allocated on another eligible node (never two at once: the abandoned
//     replica counts as the replacement in progress until it is gone).
// Abandoning is possible only before the lost replica's removal is
// requested: from then on the new replica is a caught-up voter the
// configuration depends on.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Rebuild timeout bounds: how long a replacement may stay behind its
// coordinator before it is abandoned. Long by default (a large volume
// rebuilds for hours within the host's bounds), at least a minute.
const (
	DefaultReplicaRebuildTimeout = 6 * time.Hour
	MinReplicaRebuildTimeout     = time.Minute
)

// EventReplacementAbandoned: the replica being added is given up.
const EventReplacementAbandoned EventReason = "ReplicaReplacementAbandoned"

// abandonedWhy is why repl was abandoned ("" when it was not).
func abandonedWhy(vr *storagev1alpha1.VolumeReplica) string {
	return vr.Annotations[storagev1alpha1.AnnotationReplacementAbandoned]
}

// abandonedOf lists lost's abandoned replacements: replica name to node.
func abandonedOf(lost *storagev1alpha1.VolumeReplica) map[string]string {
	out := map[string]string{}
	for _, e := range strings.Split(lost.Annotations[storagev1alpha1.AnnotationAbandonedReplacements], ",") {
		if name, node, ok := strings.Cut(e, "@"); ok {
			out[name] = node
		}
	}
	return out
}

// excludedNodes are the nodes whose replacement of lost was abandoned.
func excludedNodes(lost *storagev1alpha1.VolumeReplica) []string {
	var out []string
	for _, node := range abandonedOf(lost) {
		out = append(out, node)
	}
	return out
}

// abandonedIndex is the highest index of lost's abandoned replacements (-1
// when none): the next replacement's index is above it.
func abandonedIndex(volume string, lost *storagev1alpha1.VolumeReplica) int {
	m := -1
	for name := range abandonedOf(lost) {
		if i, ok := replicaIndex(volume, name); ok && i > m {
			m = i
		}
	}
	return m
}

// stuck says why repl cannot finish its rebuild ("" when it may still) and,
// while it may, when to look again.
func (r *Reconciler) stuck(ctx context.Context, repl *storagev1alpha1.VolumeReplica) (string, time.Duration, error) {
	if c := meta.FindStatusCondition(repl.Status.Conditions, storagev1alpha1.ReplicaStateLost.String()); c != nil && c.Status == "True" {
		return "it reports ReplicaStateLost: " + c.Reason, 0, nil
	}
	if why, err := r.backingLost(ctx, repl); err != nil || why != "" {
		return why, 0, err
	}
	now := time.Now()
	host, err := r.hostOf(ctx, repl, now)
	if err != nil {
		return "", 0, err
	}
	if err := r.markUnavailable(ctx, repl, host.gone, now); err != nil {
		return "", 0, err
	}
	wait := recheckAfter(host, now)
	if host.gone != "" {
		first := unavailableSince(repl, now)
		if !host.since.IsZero() && host.since.Before(first) {
			first = host.since
		}
		left := r.replacementDelay - now.Sub(first)
		if left <= 0 {
			return host.gone + " since " + first.UTC().Format(time.RFC3339), 0, nil
		}
		wait = left
	}
	if readyMember(repl) && repl.Status.Lag <= catchUpLag {
		return "", wait, nil
	}
	left := r.rebuildTimeout - now.Sub(repl.CreationTimestamp.Time)
	if left <= 0 {
		return fmt.Sprintf("not caught up %s after its allocation (--replica-rebuild-timeout; ready %t, lag %d)",
			r.rebuildTimeout, readyMember(repl), repl.Status.Lag), 0, nil
	}
	return "", soonest(wait, left), nil
}

// markAbandoned records the decision to abandon repl, and its node on old.
func (r *Reconciler) markAbandoned(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, old, repl *storagev1alpha1.VolumeReplica, why string) error {
	if _, recorded := abandonedOf(old)[repl.Name]; !recorded {
		orig := old.DeepCopy()
		if old.Annotations == nil {
			old.Annotations = map[string]string{}
		}
		entries := []string{repl.Name + "@" + repl.Spec.Node}
		if prev := old.Annotations[storagev1alpha1.AnnotationAbandonedReplacements]; prev != "" {
			entries = append([]string{prev}, entries...)
		}
		old.Annotations[storagev1alpha1.AnnotationAbandonedReplacements] = strings.Join(entries, ",")
		if err := r.client.Patch(ctx, old, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("exclude node %s from the replacement of VolumeReplica %s: %w", repl.Spec.Node, old.Name, err)
		}
	}
	orig := repl.DeepCopy()
	if repl.Annotations == nil {
		repl.Annotations = map[string]string{}
	}
	repl.Annotations[storagev1alpha1.AnnotationReplacementAbandoned] = why
	if err := r.client.Patch(ctx, repl, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("mark replacement VolumeReplica %s abandoned: %w", repl.Name, err)
	}
	r.event(rv, eventWarning, EventReplacementAbandoned, "Replace", "replica %s on node %s cannot replace %s: %s; it is removed and another node is tried",
		repl.Name, repl.Spec.Node, old.Name, why)
	r.log.Info("replacement abandoned", "volume", rv.Name, "replica", repl.Name, "node", repl.Spec.Node, "lost", old.Name, "why", why)
	return nil
}

// abandon advances the removal of the abandoned repl by one step.
func (r *Reconciler) abandon(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, set *replicaSet,
	old, repl *storagev1alpha1.VolumeReplica) (replacement, error) {
	what := fmt.Sprintf("replica %s on node %s, replacing %s, is abandoned (%s)", repl.Name, repl.Spec.Node, old.Name, abandonedWhy(repl))
	step := func(format string, args ...any) replacement {
		return replacement{active: true, reason: storagev1alpha1.ReasonAbandoningReplacement, requeue: replacementRequeue,
			message: what + ": " + fmt.Sprintf(format, args...)}
	}
	if gen, ok := removedGeneration(repl); ok {
		waits, err := r.retire(ctx, rv, repl)
		if err != nil {
			return replacement{}, err
		}
		if waits == "" {
			// Gone: the next reconcile judges old again and allocates
			// elsewhere.
			return replacement{active: true, reason: storagev1alpha1.ReasonAbandoningReplacement, requeue: time.Millisecond,
				message: what + ": its objects are removed; another node is tried"}, nil
		}
		return step("out of the Raft configuration (membership generation %d); %s", gen, waits), nil
	}
	req := currentRequest(*set, old)
	add := storagev1alpha1.MembershipChange{Operation: storagev1alpha1.MembershipAdd, Member: r.peer(repl)}
	removal := storagev1alpha1.MembershipChange{Operation: storagev1alpha1.MembershipRemove, Member: r.peer(repl)}
	switch {
	case req != nil && sameChange(*req, removal):
		if out := reportOf(*set, req); out != nil && out.Result == storagev1alpha1.MembershipSucceeded {
			if err := r.annotateRemoved(ctx, repl, req.Generation); err != nil {
				return replacement{}, err
			}
			r.event(rv, eventNormal, EventReplicaRemoved, "Replace", "%s: removed from the Raft configuration (generation %d)", what, req.Generation)
			return step("removed from the Raft configuration (membership generation %d)", req.Generation), nil
		}
		if err := r.request(ctx, *set, old, *req); err != nil {
			return replacement{}, err
		}
		return step("the coordinator is asked to remove %s (membership generation %d)%s", repl.Name, req.Generation, failure(*set, req)), nil
	case req != nil && sameChange(*req, add):
		// Its addition was asked for, so it may be in the configuration: a
		// non-voter until the host reported the add (the promotion) done.
		var notYet *storagev1alpha1.VolumeReplica
		if out := reportOf(*set, req); out == nil || out.Result != storagev1alpha1.MembershipSucceeded {
			notYet = repl
		}
		if ok, msg := quorumWithout(replicaCount(rv), *set, old, notYet); !ok {
			return step("%s is not removed: %s", repl.Name, msg), nil
		}
		removal.Generation = maxGeneration(*set) + 1
		if err := r.request(ctx, *set, old, removal); err != nil {
			return replacement{}, err
		}
		return step("the coordinator is asked to remove %s (membership generation %d)", repl.Name, removal.Generation), nil
	default:
		// Never asked to be added: it holds no place in the configuration.
		// Generation 0 records that no removal had to commit.
		if err := r.annotateRemoved(ctx, repl, 0); err != nil {
			return replacement{}, err
		}
		return step("never added to the Raft configuration; its objects are removed"), nil
	}
}
