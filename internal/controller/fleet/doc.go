// Package fleet is the CelldFleet operator: it renders a fleet's workload
// (a PersistentFleet StatefulSet, or a Bucket Deployment or Ordered
// StatefulSet) and its prerequisites (Services, PodDisruptionBudget,
// NetworkPolicy, the bucket's CelldStorageReservation), converges them, heals
// PersistentFleet members that cannot come back on their own through the
// replacement handoff, and removes a deleted fleet's compute and then its
// disks. docs/fleet-operator.md describes what it does and why.
//
// The operator is stateless apart from what it persists (the capacity
// history in the reservation annotation and the replacement handoff record on
// its victim Pod), the served-disk mark on a member Pod
// (docs/decisions/0004-served-disk-mark.md) and the per-member record in
// status.members (memberrecord.go: the revision each member was last Ready
// on, and since when a down member has been down, which the cluster forgets
// when a Pod is recreated). Every decision is derived from what the cluster
// reports on each reconcile; status is written by one function and, apart
// from that record, is never an input.
//
// The package must never import the storage API group, the replica or FUSE
// packages, or anything that talks to celld itself: the operator has
// Kubernetes credentials only.
package fleet
