package volume

// Status is rebuilt from the VolumeReplicas' status (written by the replica
// hosts) on every reconcile and written in one place, writeStatus. The
// volume is Ready when a coordinator serves with a quorum: a replica reports
// itself Coordinator and Ready, and a majority of the requested replicas are
// Ready voting members. Robustness is Healthy when all requested replicas
// are, Degraded when a quorum serves with fewer (or replicas diverge,
// divergence.go), Faulted when none does.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// health is what the replicas' statuses say about the volume.
type health struct {
	robustness  storagev1alpha1.Robustness
	coordinator string
	ready, want int
	summaries   []storagev1alpha1.ReplicaSummary
	// why names the replicas that are not ready members, for messages.
	lost, unavailable []string
}

// deriveHealth judges want requested replicas from those that exist.
func deriveHealth(want int, set replicaSet) health {
	h := health{want: want}
	quorum := want/2 + 1
	coordinatorReady := false
	members := 0
	for _, vr := range set {
		if _, removed := removedGeneration(vr); removed {
			// Removed from the Raft configuration: a replaced replica on
			// its way out is no member. (A volume being torn down keeps
			// reporting its replicas.)
			continue
		}
		members++
		st := vr.Status
		ready := meta.IsStatusConditionTrue(st.Conditions, storagev1alpha1.ReplicaReady.String())
		lost := meta.IsStatusConditionTrue(st.Conditions, storagev1alpha1.ReplicaStateLost.String())
		// A replica whose node or host the controller found gone
		// (replacement.go) is not counted ready: its host cannot correct
		// the Ready it reported last.
		_, hostGone := vr.Annotations[storagev1alpha1.AnnotationUnavailableSince]
		member := ready && !lost && !hostGone && (st.Role == storagev1alpha1.RoleCoordinator || st.Role == storagev1alpha1.RoleFollower)
		h.summaries = append(h.summaries, storagev1alpha1.ReplicaSummary{
			Name: vr.Name, Node: vr.Spec.Node, Role: st.Role, AppliedIndex: st.AppliedIndex, Lag: st.Lag,
			Ready: member, StateLost: lost, Digest: st.Digest.DeepCopy(),
		})
		switch {
		case lost:
			h.lost = append(h.lost, vr.Name)
		case !member:
			h.unavailable = append(h.unavailable, vr.Name)
		}
		if !member {
			continue
		}
		h.ready++
		if st.Role == storagev1alpha1.RoleCoordinator {
			h.coordinator, coordinatorReady = vr.Name, true
		}
	}
	sort.Slice(h.summaries, func(i, j int) bool { return h.summaries[i].Name < h.summaries[j].Name })
	switch {
	case !coordinatorReady || h.ready < quorum:
		h.robustness = storagev1alpha1.RobustnessFaulted
	case h.ready < want || h.ready < members:
		// A member that is not ready (a lost replica not yet removed from
		// the configuration) still counts in Raft's quorum.
		h.robustness = storagev1alpha1.RobustnessDegraded
	default:
		h.robustness = storagev1alpha1.RobustnessHealthy
	}
	return h
}

// serving: a coordinator serves with a quorum.
func (h health) serving() bool { return h.robustness != storagev1alpha1.RobustnessFaulted }

// missingText names the replicas that are not ready members.
func (h health) missingText() string {
	var parts []string
	if len(h.lost) > 0 {
		parts = append(parts, "state lost: "+strings.Join(h.lost, ", "))
	}
	if len(h.unavailable) > 0 {
		parts = append(parts, "not ready: "+strings.Join(h.unavailable, ", "))
	}
	if absent := h.want - len(h.summaries); absent > 0 {
		parts = append(parts, fmt.Sprintf("%d not created", absent))
	}
	return strings.Join(parts, "; ")
}

// outcome is what one reconcile found, for writeStatus.
type outcome struct {
	set       replicaSet
	pending   *eligibility // placement waits for nodes
	placedErr error        // placement or provisioning failed
	deleting  string       // non-empty while tearing down: what it waits for
	uncertain bool         // the API answered ambiguously during teardown
	short     []string     // backing claims not yet holding spec.capacity
	replace   replacement  // the replacement step (replacement.go)
	renewAt   time.Time    // the soonest renewal of a replica's certificate (trust.go)
}

// buildStatus is the volume's status from one reconcile's outcome.
func buildStatus(rv *storagev1alpha1.ReplicatedVolume, o outcome) storagev1alpha1.ReplicatedVolumeStatus {
	want := replicaCount(rv)
	h := deriveHealth(want, o.set)
	div := divergedCondition(rv.Status.Conditions, compareDigests(o.set), rv.Generation)
	mismatch := div.Status == metav1.ConditionTrue
	if mismatch && h.robustness == storagev1alpha1.RobustnessHealthy {
		h.robustness = storagev1alpha1.RobustnessDegraded // divergence.go says why not Faulted
	}
	st := storagev1alpha1.ReplicatedVolumeStatus{
		ObservedGeneration: rv.Generation,
		Robustness:         h.robustness,
		Coordinator:        h.coordinator,
		Replicas:           h.summaries,
		Capacity:           servedCapacity(o.set, h),
		Conditions:         append([]metav1.Condition(nil), rv.Status.Conditions...),
	}
	set := func(t storagev1alpha1.ConditionType, ok bool, reason storagev1alpha1.ConditionReason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t.String(), Status: status,
			Reason: reason.String(), Message: msg, ObservedGeneration: rv.Generation})
	}
	switch {
	case o.pending != nil:
		set(storagev1alpha1.VolumePlaced, false, storagev1alpha1.ReasonPending, o.pending.message(want))
	case o.placedErr != nil:
		set(storagev1alpha1.VolumePlaced, false, storagev1alpha1.ReasonProvisioning, o.placedErr.Error())
	case len(o.set.firstPlacementMissing(rv.Name, want)) == 0:
		set(storagev1alpha1.VolumePlaced, true, storagev1alpha1.ReasonReplicasPlaced,
			fmt.Sprintf("%d replicas on distinct nodes with their claims, services and trust", want))
	}
	switch {
	case h.serving():
		set(storagev1alpha1.VolumeReady, true, storagev1alpha1.ReasonCoordinatorServing,
			fmt.Sprintf("coordinator %s serves with %d of %d replicas", h.coordinator, h.ready, want))
	case h.ready >= want/2+1:
		set(storagev1alpha1.VolumeReady, false, storagev1alpha1.ReasonNoCoordinator,
			fmt.Sprintf("%d of %d replicas ready, no coordinator reported", h.ready, want))
	default:
		set(storagev1alpha1.VolumeReady, false, storagev1alpha1.ReasonQuorumLost,
			fmt.Sprintf("%d of %d replicas ready, %d needed for a quorum (%s)", h.ready, want, want/2+1, h.missingText()))
	}
	switch {
	case h.robustness == storagev1alpha1.RobustnessHealthy:
		set(storagev1alpha1.VolumeDegraded, false, storagev1alpha1.ReasonAllReplicasCurrent, fmt.Sprintf("all %d replicas are current members", want))
	case len(h.lost) == 0 && len(h.unavailable) == 0 && mismatch:
		set(storagev1alpha1.VolumeDegraded, true, storagev1alpha1.ReasonDigestMismatch, div.Message)
	case len(h.lost) > 0:
		set(storagev1alpha1.VolumeDegraded, true, storagev1alpha1.ReasonReplicaLost, h.missingText())
	default:
		set(storagev1alpha1.VolumeDegraded, true, storagev1alpha1.ReasonReplicaUnavailable, h.missingText())
	}
	if o.deleting == "" {
		status, reason, msg := resizing(rv, st.Capacity, o.short)
		set(storagev1alpha1.VolumeResizing, status == metav1.ConditionTrue, reason, msg)
	}
	if o.replace.reason != "" {
		set(storagev1alpha1.VolumeReplacing, o.replace.active, o.replace.reason, o.replace.message)
	} else if meta.FindStatusCondition(st.Conditions, storagev1alpha1.VolumeReplacing.String()) == nil {
		set(storagev1alpha1.VolumeReplacing, false, storagev1alpha1.ReasonNoReplacement, "no replica is lost")
	}
	meta.SetStatusCondition(&st.Conditions, div)
	switch {
	case o.uncertain:
		set(storagev1alpha1.VolumeDeleting, true, storagev1alpha1.ReasonAPIUncertain, "storage preserved: "+o.deleting)
	case o.deleting != "":
		set(storagev1alpha1.VolumeDeleting, true, storagev1alpha1.ReasonReleasePending, o.deleting)
	default:
		set(storagev1alpha1.VolumeDeleting, false, storagev1alpha1.ReasonNotDeleting, "the volume is not being deleted")
	}
	return st
}

// writeStatus writes st when it differs, bound to the volume's
// resourceVersion (a conflict is retried by the next reconcile: conflict.go).
func (r *Reconciler) writeStatus(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, st storagev1alpha1.ReplicatedVolumeStatus) error {
	r.metrics.observe(rv.Name, replicaCount(rv), st)
	if equalStatus(rv.Status, st) {
		return nil
	}
	before := rv.Status
	rv.Status = st
	if err := r.client.Status().Update(ctx, rv); err != nil {
		return fmt.Errorf("write status of volume %s: %w", rv.Name, err)
	}
	// Counted and recorded once written: a conflict retried by the next
	// reconcile would otherwise count one mismatch, or record one
	// transition, twice.
	r.divergenceWritten(rv, before.Conditions, st.Conditions)
	r.transitionsWritten(rv, before, st)
	return nil
}

// equalStatus: SetStatusCondition keeps a condition's transition time when
// nothing changed, so an unchanged volume compares equal and gets no write.
func equalStatus(a, b storagev1alpha1.ReplicatedVolumeStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}
