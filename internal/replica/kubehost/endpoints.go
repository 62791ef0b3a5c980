package kubehost

// EndpointSlices: each replica's selectorless Service (named like the
// replica, created by the volume controller) gets one EndpointSlice from the
// host, named like the replica too: the NODE Pod's IP and the worker's port.
// It is published before the worker starts and marked ready at once, so peers
// reach each other before the volume has a quorum (docs/replica-engine.md,
// "Kubernetes mode"); health is reported in the VolumeReplica's status, not
// here.
//
// The host dials a peer at the address of the peer's EndpointSlice and
// verifies the peer's Service DNS name (its certificate's SAN), so Raft
// needs neither cluster DNS nor a Service proxy on the node.

import (
	"context"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/replica"
)

// ManagedBy is the endpointslice.kubernetes.io/managed-by value of the
// host's EndpointSlices, so the EndpointSlice controller leaves them alone.
const ManagedBy = "replica-host.storage.eric.dev"

// replicaPortName is the Service port the slice serves (the controller's).
const replicaPortName = "replica"

func (a *Agent) desiredSlice(vr *storagev1alpha1.VolumeReplica) *discoveryv1.EndpointSlice {
	family := discoveryv1.AddressTypeIPv4
	if ip := net.ParseIP(a.opts.PodIP); ip.To4() == nil {
		family = discoveryv1.AddressTypeIPv6
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: vr.Name, Namespace: vr.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: vr.Name,
			discoveryv1.LabelManagedBy:   ManagedBy,
			storagev1alpha1.LabelVolume:  vr.Spec.VolumeName,
			storagev1alpha1.LabelReplica: vr.Name,
			storagev1alpha1.LabelNode:    a.opts.Node,
		}},
		AddressType: family,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{a.opts.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(a.opts.Node),
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(replicaPortName), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(vr.Spec.Port)}},
	}
}

// ensureSlice creates or corrects the replica's EndpointSlice. A slice at
// the name that another manager owns is left alone and reported.
func (a *Agent) ensureSlice(ctx context.Context, vr *storagev1alpha1.VolumeReplica) error {
	want := a.desiredSlice(vr)
	cur := &discoveryv1.EndpointSlice{}
	err := a.client.Get(ctx, client.ObjectKeyFromObject(want), cur)
	if apierrors.IsNotFound(err) {
		if err := a.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create EndpointSlice %s: %w", want.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read EndpointSlice %s: %w", want.Name, err)
	}
	if cur.Labels[storagev1alpha1.LabelReplica] != vr.Name {
		return fmt.Errorf("EndpointSlice %s/%s is not replica %s's: left alone", cur.Namespace, cur.Name, vr.Name)
	}
	if sameSlice(cur, want) {
		return nil
	}
	cur.Labels, cur.AddressType, cur.Endpoints, cur.Ports = want.Labels, want.AddressType, want.Endpoints, want.Ports
	if err := a.client.Update(ctx, cur); err != nil {
		return fmt.Errorf("update EndpointSlice %s: %w", cur.Name, err)
	}
	return nil
}

func sameSlice(a, b *discoveryv1.EndpointSlice) bool {
	if a.AddressType != b.AddressType || len(a.Endpoints) != 1 || len(a.Ports) != 1 || len(a.Endpoints[0].Addresses) != 1 {
		return false
	}
	for k, v := range b.Labels {
		if a.Labels[k] != v {
			return false
		}
	}
	ea, eb := a.Endpoints[0], b.Endpoints[0]
	return ea.Addresses[0] == eb.Addresses[0] && ptr.Deref(ea.Conditions.Ready, false) &&
		ptr.Deref(ea.NodeName, "") == ptr.Deref(eb.NodeName, "") && ptr.Deref(a.Ports[0].Port, 0) == ptr.Deref(b.Ports[0].Port, 0)
}

// resolvePeers returns each peer as the worker dials it, and the peers
// whose EndpointSlice is not published yet.
func (a *Agent) resolvePeers(ctx context.Context, vr *storagev1alpha1.VolumeReplica) ([]replica.Peer, []string, error) {
	var peers []replica.Peer
	var missing []string
	for _, p := range vr.Spec.Peers {
		peer, published, err := a.resolvePeer(ctx, vr.Namespace, p)
		if err != nil {
			return nil, nil, err
		}
		if !published {
			missing = append(missing, p.Name)
			continue
		}
		peers = append(peers, peer)
	}
	return peers, missing, nil
}

// deleteSlice removes the EndpointSlice this host wrote for the replica
// namespace/name, bound to its UID.
func (a *Agent) deleteSlice(ctx context.Context, namespace, name string) error {
	s := &discoveryv1.EndpointSlice{}
	err := a.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read EndpointSlice %s: %w", name, err)
	}
	if s.Labels[storagev1alpha1.LabelReplica] != name {
		return nil
	}
	uid := s.UID
	if err := a.client.Delete(ctx, s, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete EndpointSlice %s (uid %s): %w", name, uid, err)
	}
	return nil
}
