package kubehost

// Status: the one place the host writes a VolumeReplica's status, on every
// pass (watch events and every StatusInterval), from its worker's report;
// an unchanged status is not written.

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// role maps hashicorp/raft's state names to the API's roles.
func role(st host.Status) storagev1alpha1.ReplicaRole {
	if st.State != replica.ReplicaStateRunning {
		return storagev1alpha1.RoleStopped
	}
	switch st.RaftState {
	case "Leader":
		return storagev1alpha1.RoleCoordinator
	case "Follower":
		return storagev1alpha1.RoleFollower
	case "Candidate":
		return storagev1alpha1.RoleCandidate
	}
	return storagev1alpha1.RoleStopped
}

// lostReason says which retained state a lost replica misses.
func lostReason(reason string) storagev1alpha1.ConditionReason {
	if strings.Contains(strings.ToLower(reason), "journal") {
		return storagev1alpha1.ReasonJournalMissing
	}
	return storagev1alpha1.ReasonIdentityMissing
}

func (a *Agent) writeStatus(ctx context.Context, vr *storagev1alpha1.VolumeReplica, obs observation) error {
	next := vr.Status.DeepCopy()
	next.ObservedGeneration = vr.Generation
	wk, st, hosted := a.host.Worker(key(vr))
	if hosted {
		next.Role = role(st)
		if st.State == replica.ReplicaStateRunning {
			next.Capacity = servedCapacity(wk)
			next.Digest = a.digest.observe(key(vr), wk, st, vr.Annotations[storagev1alpha1.AnnotationDigestRequested], vr.Status.Digest)
		}
		next.AppliedIndex = int64(st.AppliedIndex)
		// Behind the coordinator, not behind its own commit index, which
		// never passes a rebuilding follower's journal (replica.Stats.Lag).
		next.Lag = int64(st.Lag())
		if st.State == replica.ReplicaStatePending { // every start slot is taken: it waits for one
			meta.SetStatusCondition(&next.Conditions, *condition(storagev1alpha1.ReplicaAdmitted, false, storagev1alpha1.ReasonAdmissionPending, st.Reason))
		} else {
			meta.SetStatusCondition(&next.Conditions, *condition(storagev1alpha1.ReplicaAdmitted, true, storagev1alpha1.ReasonAdmitted,
				fmt.Sprintf("hosted by the replica host of node %s", a.opts.Node)))
		}
		if st.State != replica.ReplicaStatePending && st.State != replica.ReplicaStateStarting || !strings.Contains(st.Reason, "bind") {
			meta.SetStatusCondition(&next.Conditions, *condition(storagev1alpha1.ReplicaPublished, true, storagev1alpha1.ReasonPublicationVisible,
				"the backing volume's bind is visible in the replica host's mount namespace"))
		}
		ready := st.State == replica.ReplicaStateRunning && st.Healthy &&
			(next.Role == storagev1alpha1.RoleCoordinator || next.Role == storagev1alpha1.RoleFollower)
		msg := fmt.Sprintf("worker %s, raft %s", st.State, st.RaftState)
		if st.HealthReason != "" {
			msg += ": " + st.HealthReason
		} else if st.Reason != "" {
			msg += ": " + st.Reason
		}
		reason := storagev1alpha1.ReasonWorkerStarting
		if ready {
			reason = storagev1alpha1.ReasonWorkerRunning
		}
		meta.SetStatusCondition(&next.Conditions, *condition(storagev1alpha1.ReplicaReady, ready, reason, msg))
		if st.State == replica.ReplicaStateLost {
			meta.SetStatusCondition(&next.Conditions, *condition(storagev1alpha1.ReplicaStateLost, true, lostReason(st.Reason),
				"retained state is missing or truncated; the data extent is unknown and the replica is never initialised afresh: "+st.Reason))
		} else {
			meta.SetStatusCondition(&next.Conditions, *condition(storagev1alpha1.ReplicaStateLost, false, storagev1alpha1.ReasonStateIntact,
				"no loss of retained state observed"))
		}
	} else {
		next.Role = storagev1alpha1.RoleStopped
		meta.SetStatusCondition(&next.Conditions, *condition(storagev1alpha1.ReplicaReady, false, storagev1alpha1.ReasonWorkerStarting,
			"no worker runs yet"))
	}
	if obs.members != nil {
		next.Members = obs.members
	}
	if obs.membership != nil {
		next.Membership = obs.membership
	}
	for _, c := range []*metav1.Condition{obs.published, obs.admitted} {
		if c != nil {
			meta.SetStatusCondition(&next.Conditions, *c)
		}
	}
	if equality.Semantic.DeepEqual(*next, vr.Status) {
		return nil
	}
	cur := vr.DeepCopy()
	cur.Status = *next
	if err := a.client.Status().Update(ctx, cur); err != nil {
		return fmt.Errorf("write status of VolumeReplica %s: %w", vr.Name, err)
	}
	return nil
}
