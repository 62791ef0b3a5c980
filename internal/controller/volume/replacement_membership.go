package volume

// The membership requests of a replacement (docs/decisions/0003-host-admin-authority.md):
// the controller records a generation-numbered change on every member and the
// coordinator's host performs it and reports the outcome. Nothing here talks
// to Raft; these helpers only read and write that record.

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

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
