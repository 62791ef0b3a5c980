package volume

// Growth (volume expansion). ControllerExpandVolume raises the volume's
// spec.capacity; from there:
//
//  1. every backing claim's request grows to it (ensureClaim);
//  2. for claims of the local driver, whose directory volumes have no size
//     to change, the controller records the expansion itself on the PV and
//     the claim's status, as external-resizer's trivial resizer would:
//     the local driver is node-deployed and external-resizer v2.3.0 has no
//     per-node mode (kubernetes-csi/external-resizer#142, open), so no
//     resizer can reach it (docs/csi.md, "Expansion");
//  3. once every claim holds the new size, each VolumeReplica's
//     spec.capacity is raised; the host holding the coordinator commits it
//     through Raft and every host reports what it serves;
//  4. status.capacity is the smallest capacity a ready member serves, and
//     Resizing is True while it is below spec.capacity.
//
// Capacity only grows at every step: the API refuses a shrinking
// spec.capacity on both objects, and the state machine refuses a smaller
// limit.

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/local"
)

// claimHolds reports whether a bound claim's recorded capacity reached want.
func claimHolds(c *corev1.PersistentVolumeClaim, want resource.Quantity) bool {
	got, ok := c.Status.Capacity[corev1.ResourceStorage]
	return c.Status.Phase == corev1.ClaimBound && ok && got.Cmp(want) >= 0
}

// recordLocalExpansion records a grown request of a bound claim of the
// local driver on its PV (spec.capacity) and the claim (status.capacity and
// allocatedResources): a directory volume has no size of its own, so the
// expansion is nominal. Claims of any other driver are left to that
// driver's resizer. It reports whether the claim holds the request after.
func (r *Reconciler) recordLocalExpansion(ctx context.Context, c *corev1.PersistentVolumeClaim) (bool, error) {
	want := c.Spec.Resources.Requests[corev1.ResourceStorage]
	if claimHolds(c, want) || c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName == "" {
		return claimHolds(c, want), nil
	}
	pv := &corev1.PersistentVolume{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: c.Spec.VolumeName}, pv); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("read PV %s of backing claim %s: %w", c.Spec.VolumeName, c.Name, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != local.DriverName {
		return false, nil // another driver's resizer grows it
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != c.UID {
		return false, fmt.Errorf("PV %s is not bound to backing claim %s (uid %s): its capacity is left alone", pv.Name, c.Name, c.UID)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(want) < 0 {
		pv.Spec.Capacity[corev1.ResourceStorage] = want
		// Bound to the resourceVersion read: a concurrent change conflicts
		// and the next reconcile looks again.
		if err := r.client.Update(ctx, pv); err != nil {
			return false, fmt.Errorf("record PV %s's capacity %s: %w", pv.Name, want.String(), err)
		}
	}
	if c.Status.Capacity == nil {
		c.Status.Capacity = corev1.ResourceList{}
	}
	c.Status.Capacity[corev1.ResourceStorage] = want
	if c.Status.AllocatedResources == nil {
		c.Status.AllocatedResources = corev1.ResourceList{}
	}
	c.Status.AllocatedResources[corev1.ResourceStorage] = want
	if err := r.client.Status().Update(ctx, c); err != nil {
		return false, fmt.Errorf("record backing claim %s's capacity %s: %w", c.Name, want.String(), err)
	}
	r.log.Info("backing claim expansion recorded", "claim", c.Name, "pv", pv.Name, "capacity", want.String())
	return true, nil
}

// syncCapacity raises each replica's spec.capacity to the volume's once
// every backing claim holds it (short names those that do not yet).
func (r *Reconciler) syncCapacity(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, set replicaSet, short []string) error {
	if len(short) > 0 {
		return nil
	}
	want := rv.Spec.Capacity
	for _, vr := range set {
		if vr == nil || vr.DeletionTimestamp != nil {
			continue
		}
		if cur := vr.Spec.Capacity; cur != nil && cur.Cmp(want) >= 0 {
			continue
		}
		vr.Spec.Capacity = ptrQuantity(want)
		if err := r.client.Update(ctx, vr); err != nil {
			return fmt.Errorf("raise the capacity of VolumeReplica %s to %s: %w", vr.Name, want.String(), err)
		}
		r.event(rv, eventNormal, EventCapacityRequested, "Expand", "replica %s asked to serve %s", vr.Name, want.String())
	}
	return nil
}

func ptrQuantity(q resource.Quantity) *resource.Quantity {
	c := q.DeepCopy()
	return &c
}

// servedCapacity is the smallest capacity a ready member reports, or nil
// when none reports one.
func servedCapacity(set replicaSet, h health) *resource.Quantity {
	ready := map[string]bool{}
	for _, s := range h.summaries {
		ready[s.Name] = s.Ready
	}
	var low *resource.Quantity
	for _, vr := range set {
		if vr == nil || !ready[vr.Name] || vr.Status.Capacity == nil {
			continue
		}
		if low == nil || vr.Status.Capacity.Cmp(*low) < 0 {
			low = ptrQuantity(*vr.Status.Capacity)
		}
	}
	return low
}

// resizing is the Resizing condition's status, reason and message.
func resizing(rv *storagev1alpha1.ReplicatedVolume, served *resource.Quantity, short []string) (metav1.ConditionStatus, storagev1alpha1.ConditionReason, string) {
	want := rv.Spec.Capacity
	switch {
	case served == nil:
		return metav1.ConditionFalse, storagev1alpha1.ReasonProvisioning, "no ready replica reports the capacity it serves yet"
	case served.Cmp(want) >= 0:
		return metav1.ConditionFalse, storagev1alpha1.ReasonCapacityServed, "the replicas serve " + served.String()
	case len(short) > 0:
		return metav1.ConditionTrue, storagev1alpha1.ReasonClaimsGrowing, fmt.Sprintf("the replicas serve %s of %s; backing claims not yet grown: %s",
			served.String(), want.String(), strings.Join(short, ", "))
	default:
		return metav1.ConditionTrue, storagev1alpha1.ReasonCapacityCommitting, fmt.Sprintf("the replicas serve %s of %s; the coordinator commits the new capacity through Raft",
			served.String(), want.String())
	}
}
