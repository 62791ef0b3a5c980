package volume

// Whether a replica's host is gone (docs/decisions/0011-node-leases.md).
// The only witness is the host's own heartbeat: the Lease its replica host
// renews in the storage namespace (internal/replica/kubehost/lease.go), as
// kubelet renews a node Lease. A host that renews it is alive, whatever its
// readiness, its Node's Ready condition or the health of any one of its
// workers: those say something about one replica (its VolumeReplica status,
// judged per replica in replacement.go) or about whether the host takes new
// work (placement.go), never that the node's other replicas are gone. Only
// the Node's absence, or the Lease's absence or expiry, make the host gone;
// its replicas are then replaced after --replica-replacement-delay.
//
// Expiry is renewTime + leaseDurationSeconds, as kube-controller-manager
// reads node Leases: the host's clock and the manager's must agree within a
// small part of the lease duration, which the replacement delay (at least a
// minute) dwarfs.

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// hostState is what the cluster reports of a replica's host.
type hostState struct {
	gone    string    // why the host counts as gone; "" while it is alive
	since   time.Time // when it went, as the cluster records it (zero: unknown)
	expires time.Time // alive: when its Lease runs out unless renewed
}

// hostOf judges the host of vr's node from the Node and the host's Lease.
func (r *Reconciler) hostOf(ctx context.Context, vr *storagev1alpha1.VolumeReplica, now time.Time) (hostState, error) {
	node := vr.Spec.Node
	err := r.client.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})
	if apierrors.IsNotFound(err) {
		return hostState{gone: "node " + node + " is absent"}, nil
	}
	if err != nil {
		return hostState{}, fmt.Errorf("read node %s: %w", node, err)
	}
	name := storagev1alpha1.HostLeaseName(node)
	lease := &coordinationv1.Lease{}
	err = r.client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: name}, lease)
	if apierrors.IsNotFound(err) {
		return hostState{gone: fmt.Sprintf("the replica host of node %s has no Lease %s", node, name)}, nil
	}
	if err != nil {
		return hostState{}, fmt.Errorf("read the Lease %s of node %s's replica host: %w", name, node, err)
	}
	return leaseState(lease, node, now), nil
}

// leaseState reads one host Lease at now.
func leaseState(l *coordinationv1.Lease, node string, now time.Time) hostState {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity != node {
		return hostState{gone: fmt.Sprintf("the Lease %s is not held by node %s's replica host", l.Name, node)}
	}
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return hostState{gone: fmt.Sprintf("the Lease %s of node %s's replica host was never renewed", l.Name, node)}
	}
	expiry := s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)
	if now.Before(expiry) {
		return hostState{expires: expiry}
	}
	return hostState{since: expiry, gone: fmt.Sprintf("the replica host of node %s last renewed its Lease at %s (duration %ds)",
		node, s.RenewTime.UTC().Format(time.RFC3339), *s.LeaseDurationSeconds)}
}

// recheckAfter is when to look at a live host again: just after its Lease
// would expire. A host that stops renewing sends no event, so this requeue
// is how its replicas' delay starts.
func recheckAfter(h hostState, now time.Time) time.Duration {
	if h.gone != "" || h.expires.IsZero() {
		return 0
	}
	return h.expires.Sub(now) + time.Second
}
