package volume

// Placement (docs/volume-controller.md, "Placement"): a replica goes only to
// an eligible local-storage node with a ready replica-host container. A node
// is eligible when
//   - it carries the local driver's topology label, which the kubelet sets
//     once local.storage.eric.dev registered on it (its backing claims can
//     be provisioned there),
//   - it is not cordoned or being deleted, and
//   - the NODE DaemonSet Pod on it reports its replica-host container ready
//     (its /readyz: the host takes work, docs/decisions/0011-node-leases.md).
// Replicas go to distinct eligible nodes, spread across zones when nodes
// carry topology.kubernetes.io/zone, each next replica to the least used zone
// and then the least loaded node. The choice is recorded in
// VolumeReplica.spec.node, so a restarted manager never places again.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// LocalStorageLabel is the topology key of local.storage.eric.dev
	// (internal/csi/local.TopologyKey): a node carries it once the local
	// driver's node plugin registered there.
	LocalStorageLabel = "topology.local.storage.eric.dev/node"
	// ZoneLabel spreads replicas across failure domains when nodes carry it.
	ZoneLabel = "topology.kubernetes.io/zone"
	// NodeComponentLabel selects the NODE DaemonSet's Pods.
	NodeComponentLabel = "app.kubernetes.io/component"
	// NodeComponentValue is NodeComponentLabel's value on NODE Pods.
	NodeComponentValue = "node"
	// ReplicaHostContainer is the NODE Pod's replica-host container.
	ReplicaHostContainer = "replica-host"
)

// candidate is an eligible node.
type candidate struct {
	name, zone string
}

// eligibility is what the controller found when it looked for nodes, kept to
// say exactly which requirement fails when too few are eligible.
type eligibility struct {
	nodes, labelled, unschedulable, hostNotReady int
	notReadyNames                                []string
	eligible                                     []candidate
}

// message explains why only len(eligible) of want nodes are eligible.
func (e eligibility) message(want int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of the %d distinct nodes the volume needs are eligible: %d nodes, %d of them labelled %s",
		len(e.eligible), want, e.nodes, e.labelled, LocalStorageLabel)
	if e.unschedulable > 0 {
		fmt.Fprintf(&b, ", %d of those cordoned or being deleted", e.unschedulable)
	}
	if e.hostNotReady > 0 {
		names := e.notReadyNames
		if len(names) > 5 {
			names = append(names[:5:5], "…")
		}
		fmt.Fprintf(&b, ", %d without a ready %s container (%s)", e.hostNotReady, ReplicaHostContainer, strings.Join(names, ", "))
	}
	return b.String()
}

// findEligible lists nodes and NODE Pods and classifies every node.
func (r *Reconciler) findEligible(ctx context.Context) (eligibility, error) {
	var e eligibility
	nodes := &corev1.NodeList{}
	if err := r.client.List(ctx, nodes); err != nil {
		return e, fmt.Errorf("list nodes: %w", err)
	}
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(r.namespace),
		client.MatchingLabels{NodeComponentLabel: NodeComponentValue}); err != nil {
		return e, fmt.Errorf("list NODE pods in %s: %w", r.namespace, err)
	}
	hostReady := map[string]bool{}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && replicaHostReady(p) {
			hostReady[p.Spec.NodeName] = true
		}
	}
	e.nodes = len(nodes.Items)
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if _, ok := n.Labels[LocalStorageLabel]; !ok {
			continue
		}
		e.labelled++
		if n.Spec.Unschedulable || n.DeletionTimestamp != nil {
			e.unschedulable++
			continue
		}
		if !hostReady[n.Name] {
			e.hostNotReady++
			e.notReadyNames = append(e.notReadyNames, n.Name)
			continue
		}
		e.eligible = append(e.eligible, candidate{name: n.Name, zone: n.Labels[ZoneLabel]})
	}
	sort.Strings(e.notReadyNames)
	return e, nil
}

// replicaHostReady: the Pod runs and its replica-host container is ready.
func replicaHostReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == ReplicaHostContainer {
			return c.Ready
		}
	}
	return false
}

// choose picks need nodes from eligible, none of them in taken (nodes already
// holding a replica of this volume). Zones already used by the volume count,
// so the spread holds across restarts. load is how many replicas each node
// hosts already, over all volumes. It returns nil when fewer than need
// remain: the volume is never given fewer replicas than requested.
func choose(eligible []candidate, taken map[string]string, load map[string]int, need int) []candidate {
	zoneUse := map[string]int{}
	for _, zone := range taken {
		zoneUse[zone]++
	}
	pool := make([]candidate, 0, len(eligible))
	for _, c := range eligible {
		if _, ok := taken[c.name]; !ok {
			pool = append(pool, c)
		}
	}
	if len(pool) < need {
		return nil
	}
	out := make([]candidate, 0, need)
	for len(out) < need {
		sort.SliceStable(pool, func(i, j int) bool {
			a, b := pool[i], pool[j]
			if zoneUse[a.zone] != zoneUse[b.zone] {
				return zoneUse[a.zone] < zoneUse[b.zone]
			}
			if load[a.name] != load[b.name] {
				return load[a.name] < load[b.name]
			}
			return a.name < b.name
		})
		c := pool[0]
		pool = pool[1:]
		zoneUse[c.zone]++
		out = append(out, c)
	}
	return out
}
