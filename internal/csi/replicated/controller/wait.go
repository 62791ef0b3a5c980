package controller

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Waiting. CreateVolume and DeleteVolume each end in a state only the volume
// controller can bring about (Ready; the object gone). A call waits for it
// a bounded time, then answers ABORTED ("operation pending for the volume"),
// which csi-provisioner treats as in progress and retries with the same
// name; the message says what is awaited so `kubectl describe pvc` shows it.

// settled says whether a volume (nil: gone) is where a call waits for it to
// be, and if not, what it waits for.
type settled func(rv *storagev1alpha1.ReplicatedVolume) (bool, string)

// awaitVolume re-reads the volume until done holds, the call's wait ends or
// ctx ends, and returns the last volume read.
func (c *Controller) awaitVolume(ctx context.Context, id, rpc string, done settled) (*storagev1alpha1.ReplicatedVolume, error) {
	deadline := time.Now().Add(c.wait)
	if d, ok := ctx.Deadline(); ok && d.Add(-pollInterval).Before(deadline) {
		// Answer before the caller's own deadline, so it reads why.
		deadline = d.Add(-pollInterval)
	}
	for {
		rv, err := c.getVolume(ctx, id)
		if err != nil {
			return nil, err
		}
		ok, waiting := done(rv)
		if ok {
			return rv, nil
		}
		if !time.Now().Add(pollInterval).Before(deadline) {
			return nil, status.Errorf(codes.Aborted, "%s: volume %s is %s; retry", rpc, id, waiting)
		}
		t := time.NewTimer(pollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, status.Errorf(codes.Aborted, "%s: volume %s is %s (%v); retry", rpc, id, waiting, ctx.Err())
		case <-t.C:
		}
	}
}

// servesWithQuorum: the volume controller placed every replica and a
// coordinator serves with a quorum (docs/csi.md, "CreateVolume": it returns
// then).
func servesWithQuorum(rv *storagev1alpha1.ReplicatedVolume) (bool, string) {
	if rv == nil {
		return false, "gone: it was deleted while being created"
	}
	if rv.DeletionTimestamp != nil {
		return false, "being deleted"
	}
	placed := meta.FindStatusCondition(rv.Status.Conditions, storagev1alpha1.VolumePlaced.String())
	if placed == nil || placed.Status != metav1.ConditionTrue {
		return false, fmt.Sprintf("waiting for the volume controller to place %d replicas on distinct nodes (%s)",
			rv.Spec.Replicas, describe(storagev1alpha1.VolumePlaced, placed))
	}
	ready := meta.FindStatusCondition(rv.Status.Conditions, storagev1alpha1.VolumeReady.String())
	if ready == nil || ready.Status != metav1.ConditionTrue {
		return false, fmt.Sprintf("waiting for a coordinator to serve with a quorum of its %d replicas (%s)",
			rv.Spec.Replicas, describe(storagev1alpha1.VolumeReady, ready))
	}
	return true, ""
}

// gone: the object no longer exists.
func gone(rv *storagev1alpha1.ReplicatedVolume) (bool, string) {
	if rv == nil {
		return true, ""
	}
	del := meta.FindStatusCondition(rv.Status.Conditions, storagev1alpha1.VolumeDeleting.String())
	return false, fmt.Sprintf("waiting for the volume controller's ordered teardown (%s)", describe(storagev1alpha1.VolumeDeleting, del))
}

// describe renders a condition for a message.
func describe(t storagev1alpha1.ConditionType, c *metav1.Condition) string {
	if c == nil {
		return t.String() + " not reported yet"
	}
	s := fmt.Sprintf("%s=%s", t, c.Status)
	if c.Reason != "" {
		s += " " + c.Reason
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}
