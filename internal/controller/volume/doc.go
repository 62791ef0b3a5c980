// Package volume is the volume controller of the replicated.storage.eric.dev
// driver (docs/volume-controller.md; docs/architecture.md, "Volume
// controller"). For each cluster-scoped ReplicatedVolume it chooses R distinct
// eligible nodes, writes the volume's own trust, creates the backing claims
// bound to those nodes, the selectorless replica Services and the
// VolumeReplicas the replica hosts run, reports robustness from what the
// hosts write, and tears all of it down in order when the volume is deleted.
//
// The controller owns PVC allocation, selected-node binding and lifecycle
// intent; the replica host owns publication, workers and EndpointSlices.
// Kubernetes records intent only: the Raft journal and the current quorum
// decide file state, so nothing here reads or writes replica data.
package volume
