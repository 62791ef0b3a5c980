package volume

// VolumeReplicas are the placement record: they are created first, each with
// its node and port, so a manager that stops after any later step finds the
// placement again instead of choosing anew (a backing claim bound to one node
// and a replica on another would never publish). Peers (and the membership
// request of a replacement, replacement.go) are the mutable part of a
// replica's spec and follow the volume's members.

import (
	"context"
	"fmt"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// replicaSet is a volume's VolumeReplicas, sorted by index. Indices below
// the replica count are the first placement's; a replacement takes the next
// index above every existing one, so a name (and Raft server ID) is never
// used twice: the replica with the highest index is removed only after a
// higher one replaced it.
type replicaSet []*storagev1alpha1.VolumeReplica

// listReplicas reads the volume's VolumeReplicas. One at a replica name that
// another volume owns is an error: names are identities and are never
// shared.
func (r *Reconciler) listReplicas(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume) (replicaSet, error) {
	return r.listReplicasFrom(ctx, r.client, rv)
}

func (r *Reconciler) listReplicasFrom(ctx context.Context, reader client.Reader, rv *storagev1alpha1.ReplicatedVolume) (replicaSet, error) {
	list := &storagev1alpha1.VolumeReplicaList{}
	if err := reader.List(ctx, list, client.InNamespace(r.namespace),
		client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
		return nil, fmt.Errorf("list replicas of volume %s: %w", rv.Name, err)
	}
	var set replicaSet
	for i := range list.Items {
		vr := &list.Items[i]
		if _, ok := replicaIndex(rv.Name, vr.Name); !ok {
			continue // labelled for the volume, but not one of its names: not ours
		}
		if !ownedBy(vr, rv) {
			return nil, fmt.Errorf("VolumeReplica %s/%s is not volume %s's (uid %s): left alone", vr.Namespace, vr.Name, rv.Name, rv.UID)
		}
		set = append(set, vr)
	}
	set.sort(rv.Name)
	return set, nil
}

func (s replicaSet) sort(volume string) {
	sort.Slice(s, func(i, j int) bool {
		a, _ := replicaIndex(volume, s[i].Name)
		b, _ := replicaIndex(volume, s[j].Name)
		return a < b
	})
}

func replicaCount(rv *storagev1alpha1.ReplicatedVolume) int {
	if rv.Spec.Replicas == 0 {
		return storagev1alpha1.DefaultReplicas
	}
	return int(rv.Spec.Replicas)
}

// replaced: a replacement was ever allocated. The first placement is then
// complete for good: an index it left is never filled again.
func (s replicaSet) replaced(want int) bool {
	for _, vr := range s {
		if vr.Spec.Replaces != "" {
			return true
		}
	}
	return len(s) > 0 && s.maxIndex(s[0].Spec.VolumeName) >= want
}

// maxIndex is the highest index in the set (-1 when empty).
func (s replicaSet) maxIndex(volume string) int {
	m := -1
	for _, vr := range s {
		if i, ok := replicaIndex(volume, vr.Name); ok && i > m {
			m = i
		}
	}
	return m
}

// firstPlacementMissing lists the first placement's indices without a
// VolumeReplica.
func (s replicaSet) firstPlacementMissing(volume string, want int) []int {
	if s.replaced(want) {
		return nil
	}
	have := map[int]bool{}
	for _, vr := range s {
		if i, ok := replicaIndex(volume, vr.Name); ok {
			have[i] = true
		}
	}
	var out []int
	for i := 0; i < want; i++ {
		if !have[i] {
			out = append(out, i)
		}
	}
	return out
}

// find returns the replica named name, or nil.
func (s replicaSet) find(name string) *storagev1alpha1.VolumeReplica {
	for _, vr := range s {
		if vr.Name == name {
			return vr
		}
	}
	return nil
}

// member: the replica is (or is about to be) in the volume's Raft
// configuration: not being deleted and not recorded as removed from it.
func member(vr *storagev1alpha1.VolumeReplica) bool {
	_, removed := vr.Annotations[storagev1alpha1.AnnotationMembershipRemoved]
	return vr.DeletionTimestamp == nil && !removed
}

// place creates the first placement's missing VolumeReplicas on distinct
// eligible nodes. It returns the eligibility it found when fewer nodes than
// needed are eligible (nothing is created then: never fewer replicas than
// requested).
func (r *Reconciler) place(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, set *replicaSet) (*eligibility, error) {
	missing := set.firstPlacementMissing(rv.Name, replicaCount(rv))
	if len(missing) == 0 {
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
	book, err := r.readPortBook(ctx)
	if err != nil {
		return nil, err
	}
	taken := map[string]string{}
	zoneOf := map[string]string{}
	for _, c := range elig.eligible {
		zoneOf[c.name] = c.zone
	}
	for _, vr := range *set {
		taken[vr.Spec.Node] = zoneOf[vr.Spec.Node]
	}
	chosen := choose(elig.eligible, taken, book.load(), len(missing))
	if chosen == nil {
		return &elig, nil
	}
	var created []*storagev1alpha1.VolumeReplica
	for n, i := range missing {
		c := chosen[n]
		port, err := book.next(c.name, r.ports)
		if err != nil {
			return nil, err
		}
		vr := r.newReplica(rv, i, c.name, port)
		*set = append(*set, vr)
		created = append(created, vr)
	}
	set.sort(rv.Name)
	// Every new replica lists all of its peers from the start, so the first
	// replica can bootstrap the full configuration.
	for _, vr := range created {
		vr.Spec.Peers = r.peersOf(*set, vr)
		if err := r.client.Create(ctx, vr); err != nil {
			return nil, fmt.Errorf("create VolumeReplica %s on %s port %d: %w", vr.Name, vr.Spec.Node, vr.Spec.Port, err)
		}
		// The replica is the related object: three placements in one
		// reconcile are three events, not one series naming r0 (events.go).
		r.eventAbout(rv, vr, eventNormal, EventPlaced, "Place", "replica %s placed on node %s (zone %q), port %d",
			vr.Name, vr.Spec.Node, zoneOf[vr.Spec.Node], vr.Spec.Port)
		r.log.Info("placed replica", "volume", rv.Name, "replica", vr.Name, "node", vr.Spec.Node, "port", vr.Spec.Port)
	}
	return nil, nil
}

// readPortBook reads every VolumeReplica of the namespace from the API
// server (not the cache) into a port book; the caller holds portMu.
func (r *Reconciler) readPortBook(ctx context.Context) (portBook, error) {
	all, err := r.readAllReplicas(ctx)
	if err != nil {
		return nil, err
	}
	return newPortBook(all), nil
}

// readAllReplicas lists every VolumeReplica of the namespace from the API
// server, for port allocation and the replacement bound (bound.go).
func (r *Reconciler) readAllReplicas(ctx context.Context) ([]storagev1alpha1.VolumeReplica, error) {
	all := &storagev1alpha1.VolumeReplicaList{}
	if err := r.reader.List(ctx, all, client.InNamespace(r.namespace)); err != nil {
		return nil, fmt.Errorf("list replicas in %s for port allocation: %w", r.namespace, err)
	}
	return all.Items, nil
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

// peersOf lists every other member of the set by Service address and port.
func (r *Reconciler) peersOf(set replicaSet, self *storagev1alpha1.VolumeReplica) []storagev1alpha1.ReplicaPeer {
	var out []storagev1alpha1.ReplicaPeer
	for _, vr := range set {
		if vr.Name == self.Name || !member(vr) {
			continue
		}
		out = append(out, r.peer(vr))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// syncPeers writes each replica's peer list where it differs (after a
// placement interrupted between creates, the first replicas lack the later
// ones). An unchanged replica gets no write.
func (r *Reconciler) syncPeers(ctx context.Context, set replicaSet) error {
	for _, vr := range set {
		if !member(vr) {
			continue
		}
		want := r.peersOf(set, vr)
		if equalPeers(vr.Spec.Peers, want) {
			continue
		}
		// A merge patch: the replacement steps patch the same objects in
		// this reconcile, so an update bound to the read resourceVersion
		// would conflict with them.
		orig := vr.DeepCopy()
		vr.Spec.Peers = want
		if err := r.client.Patch(ctx, vr, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("update peers of VolumeReplica %s: %w", vr.Name, err)
		}
	}
	return nil
}

// peer is vr as its peers list it.
func (r *Reconciler) peer(vr *storagev1alpha1.VolumeReplica) storagev1alpha1.ReplicaPeer {
	return storagev1alpha1.ReplicaPeer{Name: vr.Name, Address: serviceDNSName(vr.Name, r.namespace), Port: vr.Spec.Port}
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
