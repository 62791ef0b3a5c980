package volume

// Listener ports (docs/volume-controller.md, "Ports"). Each worker listens on
// its own port of its node, so a port must never be handed to two workers of
// one node. The allocation is derived, on every placement, from every
// VolumeReplica that exists on the node (those being deleted included: their
// worker may still listen), read from the API server rather than the cache,
// and the read and the creates that follow run under one lock, so neither
// concurrent reconciles of different volumes nor a cache that has not yet
// seen the last create can hand a port out twice. Leader election makes this
// manager the only allocator.

import (
	"fmt"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Default port range of replica listeners: [DefaultPortBase,
// DefaultPortBase+DefaultPortCount). It holds more than the host's default
// bound of 128 workers per node and stays clear of the NodePort range.
const (
	DefaultPortBase  int32 = 20000
	DefaultPortCount int32 = 1000
)

// PortRange is a node's range of replica listener ports.
type PortRange struct {
	Base, Count int32
}

// validate keeps the range within the API's unprivileged port bounds.
func (p PortRange) validate() error {
	if p.Count < 1 || p.Base < storagev1alpha1.MinReplicaPort ||
		int64(p.Base)+int64(p.Count)-1 > storagev1alpha1.MaxReplicaPort {
		return fmt.Errorf("replica port range [%d, %d) must lie within [%d, %d]",
			p.Base, int64(p.Base)+int64(p.Count), storagev1alpha1.MinReplicaPort, storagev1alpha1.MaxReplicaPort)
	}
	return nil
}

// portBook is the ports in use per node, built from all VolumeReplicas.
type portBook map[string]map[int32]bool

func newPortBook(replicas []storagev1alpha1.VolumeReplica) portBook {
	b := portBook{}
	for i := range replicas {
		b.take(replicas[i].Spec.Node, replicas[i].Spec.Port)
	}
	return b
}

func (b portBook) take(node string, port int32) {
	if b[node] == nil {
		b[node] = map[int32]bool{}
	}
	b[node][port] = true
}

// next hands out the lowest free port of node and records it as taken, so
// the lowest ports are reused after deletions and the choice is
// deterministic.
func (b portBook) next(node string, r PortRange) (int32, error) {
	for p := r.Base; int64(p) < int64(r.Base)+int64(r.Count); p++ {
		if !b[node][p] {
			b.take(node, p)
			return p, nil
		}
	}
	return 0, fmt.Errorf("node %s has no free replica port in [%d, %d): %d in use", node, r.Base, r.Base+r.Count, len(b[node]))
}

// load counts replicas per node.
func (b portBook) load() map[string]int {
	out := map[string]int{}
	for n, ports := range b {
		out[n] = len(ports)
	}
	return out
}
