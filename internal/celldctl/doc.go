// Package celldctl renders the reports of the kubectl-celld plugin: one
// fleet's status with its members, and the replicated volumes with their
// replicas. It only reads the Kubernetes API; it never writes.
//
// It must never import controller packages: the plugin shows what the cluster
// reports, not what a controller would decide.
package celldctl
