package volume

// Divergence (docs/volume-controller.md, "Divergence"): the replica hosts
// publish each replica's state digest (applied command index + SHA-256 of the
// whole state) in status.digest; the controller compares the digests
// published at equal indexes. Replicas of one Raft group apply the same
// commands in the same order, so equal indexes must mean equal states: two
// values at one index is divergence (Diverged=True DigestMismatch).
//
// Robustness is Degraded while replicas diverge, not Faulted: Faulted says no
// quorum serves and I/O fails, and a diverged replica stops neither. The
// journal the quorum holds stays the authority; what the mismatch costs is
// redundancy: one replica's backing state is no longer a copy the volume can
// fall back on, so it tolerates fewer further failures, which is what
// Degraded says.

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Events of the Diverged condition.
const (
	EventDigestMismatch EventReason = "DigestMismatch"
	EventDigestsAgree   EventReason = "DigestsAgree"
)

// shortDigest is how much of a digest a message shows.
const shortDigest = 12

// comparison is the verdict of one look at the replicas' digests.
type comparison struct {
	mismatch bool
	index    int64
	message  string
}

// digestGroup is the replicas that published one value at one index.
type digestGroup struct {
	value    string
	replicas []string
}

// compareDigests judges the digests of the replicas that are members
// (a replica removed from the Raft configuration no longer applies the
// journal). Different values at one index, the highest such, is a
// mismatch. Agreement needs every ready member that published a digest
// to have published the same value at the same index, two or more of them:
// a replica still at an older index (it digested before the others moved
// on, or it lags) has not been compared yet, and a replica that diverged
// must not escape the verdict by digesting alone at a new index. nil: no
// verdict now; the previous one stands.
func compareDigests(set replicaSet) *comparison {
	byIndex := map[int64]map[string][]string{}
	var ready []*storagev1alpha1.VolumeReplica
	for _, vr := range set {
		if _, removed := removedGeneration(vr); removed || vr.Status.Digest == nil {
			continue
		}
		d := vr.Status.Digest
		if byIndex[d.Index] == nil {
			byIndex[d.Index] = map[string][]string{}
		}
		byIndex[d.Index][d.Value] = append(byIndex[d.Index][d.Value], vr.Name)
		if meta.IsStatusConditionTrue(vr.Status.Conditions, storagev1alpha1.ReplicaReady.String()) {
			ready = append(ready, vr)
		}
	}
	var mismatch *comparison
	for idx, values := range byIndex {
		if len(values) > 1 && (mismatch == nil || idx > mismatch.index) {
			mismatch = &comparison{mismatch: true, index: idx, message: mismatchText(idx, sortedGroups(values))}
		}
	}
	if mismatch != nil {
		return mismatch
	}
	if len(ready) < 2 {
		return nil
	}
	first := ready[0].Status.Digest
	names := []string{}
	for _, vr := range ready {
		if d := vr.Status.Digest; d.Index != first.Index || d.Value != first.Value {
			return nil
		}
		names = append(names, vr.Name)
	}
	sort.Strings(names)
	return &comparison{index: first.Index, message: fmt.Sprintf("replicas %s published the same state digest %s at applied index %d",
		strings.Join(names, ", "), short(first.Value), first.Index)}
}

// sortedGroups orders the groups of one index largest first (the odd ones
// out last), then by value, each group's replicas by name.
func sortedGroups(values map[string][]string) []digestGroup {
	groups := make([]digestGroup, 0, len(values))
	for v, names := range values {
		sort.Strings(names)
		groups = append(groups, digestGroup{value: v, replicas: names})
	}
	sort.Slice(groups, func(i, j int) bool {
		if len(groups[i].replicas) != len(groups[j].replicas) {
			return len(groups[i].replicas) > len(groups[j].replicas)
		}
		return groups[i].value < groups[j].value
	})
	return groups
}

func mismatchText(idx int64, groups []digestGroup) string {
	parts := make([]string, 0, len(groups))
	for _, g := range groups {
		parts = append(parts, fmt.Sprintf("%s: %s", strings.Join(g.replicas, ", "), short(g.value)))
	}
	return fmt.Sprintf("replicas published different state digests at applied index %d (%s)", idx, strings.Join(parts, "; "))
}

func short(v string) string {
	if len(v) > shortDigest {
		return v[:shortDigest]
	}
	return v
}

// divergedCondition is the Diverged condition: the comparison's verdict,
// or the previous condition when there is none now (a verdict stands until
// another replaces it), or Unknown before any.
func divergedCondition(prev []metav1.Condition, c *comparison, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: storagev1alpha1.VolumeDiverged.String(), ObservedGeneration: generation}
	switch {
	case c != nil && c.mismatch:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, storagev1alpha1.ReasonDigestMismatch.String(), c.message
	case c != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, storagev1alpha1.ReasonDigestsAgree.String(), c.message
	default:
		if p := meta.FindStatusCondition(prev, storagev1alpha1.VolumeDiverged.String()); p != nil {
			cond.Status, cond.Reason, cond.Message = p.Status, p.Reason, p.Message
		} else {
			cond.Status, cond.Reason = metav1.ConditionUnknown, storagev1alpha1.ReasonDigestsPending.String()
			cond.Message = "no two replicas have published a state digest at the same applied index yet"
		}
	}
	return cond
}

// diverged reports whether a status says replicas diverge, and the message.
func diverged(conds []metav1.Condition) (bool, string) {
	c := meta.FindStatusCondition(conds, storagev1alpha1.VolumeDiverged.String())
	if c == nil || c.Status != metav1.ConditionTrue {
		return false, ""
	}
	return true, c.Message
}

// divergenceWritten records a Diverged transition that was written: a new
// mismatch (or a mismatch at another index or between other replicas)
// counts once and is an event; agreement after a mismatch is an event.
func (r *Reconciler) divergenceWritten(rv *storagev1alpha1.ReplicatedVolume, before, after []metav1.Condition) {
	was, wasMsg := diverged(before)
	is, msg := diverged(after)
	switch {
	case is && (!was || wasMsg != msg):
		r.metrics.digestMismatch(rv.Name)
		r.event(rv, eventWarning, EventDigestMismatch, "Compare", "%s", msg)
	case was && !is:
		if c := meta.FindStatusCondition(after, storagev1alpha1.VolumeDiverged.String()); c != nil {
			r.event(rv, eventNormal, EventDigestsAgree, "Compare", "%s", c.Message)
		}
	}
}
