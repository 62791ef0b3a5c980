package volume

// VolumeReplicas are the placement record: they are created first, each with
// its node and port, so a manager that stops after any later step finds the
// placement again instead of choosing anew (a backing claim bound to one node
// and a replica on another would never publish). Peers are the one mutable
// part of a replica's spec and follow the volume's replicas.

import (
	"context"
	"fmt"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// replicaSet is a volume's VolumeReplicas by index; a nil entry is not
// created yet.
type replicaSet []*storagev1alpha1.VolumeReplica

// listReplicas reads the volume's VolumeReplicas and files them by index.
// One at a replica name that another volume owns is an error: names are
// identities and are never shared.
func (r *Reconciler) listReplicas(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume) (replicaSet, error) {
	list := &storagev1alpha1.VolumeReplicaList{}
	if err := r.client.List(ctx, list, client.InNamespace(r.namespace),
		client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
		return nil, fmt.Errorf("list replicas of volume %s: %w", rv.Name, err)
	}
	byName := map[string]*storagev1alpha1.VolumeReplica{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	set := make(replicaSet, replicaCount(rv))
	for i := range set {
		vr := byName[ReplicaName(rv.Name, i)]
		if vr == nil {
			continue
		}
		if !ownedBy(vr, rv) {
			return nil, fmt.Errorf("VolumeReplica %s/%s is not volume %s's (uid %s): left alone", vr.Namespace, vr.Name, rv.Name, rv.UID)
		}
		set[i] = vr
	}
	return set, nil
}

func replicaCount(rv *storagev1alpha1.ReplicatedVolume) int {
	if rv.Spec.Replicas == 0 {
		return storagev1alpha1.DefaultReplicas
	}
	return int(rv.Spec.Replicas)
}

// missing counts the indices without a VolumeReplica.
func (s replicaSet) missing() int {
	n := 0
	for _, vr := range s {
		if vr == nil {
			n++
		}
	}
	return n
}

// place creates the missing VolumeReplicas on distinct eligible nodes. It
// returns the eligibility it found when fewer nodes than needed are eligible
// (nothing is created then: never fewer replicas than requested).
func (r *Reconciler) place(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, set replicaSet) (*eligibility, error) {
	need := set.missing()
	if need == 0 {
		return nil, nil
	}
	elig, err := r.findEligible(ctx)
	if err != nil {
		return nil, err
	}
	// The port read and the creates below are one step under the lock: see
	// ports.go.
	r.portMu.Lock()
	defer r.portMu.Unlock()
	all := &storagev1alpha1.VolumeReplicaList{}
	if err := r.reader.List(ctx, all, client.InNamespace(r.namespace)); err != nil {
		return nil, fmt.Errorf("list replicas in %s for port allocation: %w", r.namespace, err)
	}
	book := newPortBook(all.Items)
	taken := map[string]string{}
	zoneOf := map[string]string{}
	for _, c := range elig.eligible {
		zoneOf[c.name] = c.zone
	}
	for _, vr := range set {
		if vr != nil {
			taken[vr.Spec.Node] = zoneOf[vr.Spec.Node]
		}
	}
	chosen := choose(elig.eligible, taken, book.load(), need)
	if chosen == nil {
		return &elig, nil
	}
	var created []int
	for i := range set {
		if set[i] != nil {
			continue
		}
		c := chosen[len(created)]
		port, err := book.next(c.name, r.ports)
		if err != nil {
			return nil, err
		}
		set[i] = r.newReplica(rv, i, c.name, port)
		created = append(created, i)
	}
	// Every new replica lists all of its peers from the start, so the first
	// replica can bootstrap the full configuration.
	for _, i := range created {
		vr := set[i]
		vr.Spec.Peers = r.peersOf(set, i)
		if err := r.client.Create(ctx, vr); err != nil {
			return nil, fmt.Errorf("create VolumeReplica %s on %s port %d: %w", vr.Name, vr.Spec.Node, vr.Spec.Port, err)
		}
		r.event(rv, "Normal", "Placed", "Place", "replica %s placed on node %s (zone %q), port %d",
			vr.Name, vr.Spec.Node, zoneOf[vr.Spec.Node], vr.Spec.Port)
		r.log.Info("placed replica", "volume", rv.Name, "replica", vr.Name, "node", vr.Spec.Node, "port", vr.Spec.Port)
	}
	return nil, nil
}

func (r *Reconciler) newReplica(rv *storagev1alpha1.ReplicatedVolume, i int, node string, port int32) *storagev1alpha1.VolumeReplica {
	name := ReplicaName(rv.Name, i)
	meta := r.childMeta(rv, r.namespace, name)
	meta.Labels[storagev1alpha1.LabelNode] = node
	vr := &storagev1alpha1.VolumeReplica{
		ObjectMeta: meta,
		Spec: storagev1alpha1.VolumeReplicaSpec{
			VolumeName:       rv.Name,
			Node:             node,
			Port:             port,
			BackingClaimName: name,
			Generation:       1,
			Capacity:         ptrQuantity(rv.Spec.Capacity),
		},
	}
	controllerutil.AddFinalizer(vr, storagev1alpha1.FinalizerReplicaRelease)
	return vr
}

// peersOf lists every other replica of the set by Service address and port.
func (r *Reconciler) peersOf(set replicaSet, self int) []storagev1alpha1.ReplicaPeer {
	var out []storagev1alpha1.ReplicaPeer
	for i, vr := range set {
		if i == self || vr == nil {
			continue
		}
		out = append(out, storagev1alpha1.ReplicaPeer{Name: vr.Name, Address: serviceDNSName(vr.Name, r.namespace), Port: vr.Spec.Port})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// syncPeers writes each replica's peer list where it differs (after a
// placement interrupted between creates, the first replicas lack the later
// ones). An unchanged replica gets no write.
func (r *Reconciler) syncPeers(ctx context.Context, set replicaSet) error {
	for i, vr := range set {
		if vr == nil || vr.DeletionTimestamp != nil {
			continue
		}
		want := r.peersOf(set, i)
		if equalPeers(vr.Spec.Peers, want) {
			continue
		}
		vr.Spec.Peers = want
		if err := r.client.Update(ctx, vr); err != nil {
			return fmt.Errorf("update peers of VolumeReplica %s: %w", vr.Name, err)
		}
	}
	return nil
}

func equalPeers(a, b []storagev1alpha1.ReplicaPeer) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
