package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
)

// The replica host's heartbeat (docs/decisions/0011-node-leases.md): one
// coordination.k8s.io/v1 Lease per node in the storage namespace, renewed
// by that node's replica host the way kubelet renews its node Lease
// (holderIdentity = the node, leaseDurationSeconds, renewTime). The volume
// controller judges a replica's host gone only when its Lease is absent or
// expired, never from the host's readiness.

// HostLeasePrefix begins the name of every replica host's Lease.
const HostLeasePrefix = "replica-host-"

// maxObjectName is the longest DNS subdomain, a Lease's name limit.
const maxObjectName = 253

// HostLeaseName is the Lease the replica host of node renews. A node name
// too long for the prefix is cut and followed by a digest of the whole name,
// so two nodes never share a Lease.
func HostLeaseName(node string) string {
	if len(HostLeasePrefix)+len(node) <= maxObjectName {
		return HostLeasePrefix + node
	}
	sum := sha256.Sum256([]byte(node))
	digest := hex.EncodeToString(sum[:])[:8]
	return HostLeasePrefix + node[:maxObjectName-len(HostLeasePrefix)-len(digest)-1] + "-" + digest
}
