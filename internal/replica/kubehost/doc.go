// Package kubehost is the replica host's Kubernetes mode: the NODE
// DaemonSet's replica-host container watching the VolumeReplicas of its own
// node and running each as a worker of the shared host (internal/replica/host)
// within the host's admission bounds (docs/replica-engine.md, "Kubernetes
// mode"; docs/volume-controller.md, "The host side").
//
// Per VolumeReplica it keeps the replica's EndpointSlice (the NODE Pod's IP
// and the worker's port) on the replica's selectorless Service, published
// before quorum so Raft can form; reads the replica's Secret into files on
// host storage and refreshes them in the background (an API outage keeps
// the files it has); protects the backing claim with the backing-use
// finalizer before the worker starts; waits until the claim's publication
// beneath the consumer mount root is visible in this process's own mount
// namespace; starts the worker; and reports role, applied index, lag and
// conditions in the VolumeReplica's status. On deletion (the manager's
// replica-release finalizer holds the object) it closes the worker, removes
// its EndpointSlice and writes the identity-bound release acknowledgement,
// status.releasedClaimUID. Besides, it renews its node's Lease in the
// storage namespace (lease.go), the heartbeat by which the volume controller
// judges the node's replicas' host alive.
//
// The engine (internal/replica) and the host stay free of client-go: only
// this package talks to the API server.
package kubehost
