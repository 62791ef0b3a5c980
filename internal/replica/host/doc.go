// Package host runs many replica workers in one process: admission bounds
// (workers, concurrent starts, shared HTTP operations, checkpoint captures,
// outbound rebuilds and their shared bandwidth), the host's record of which
// replicas it initialised, health and metrics endpoints, and the standalone
// configuration that runs a host with no Kubernetes.
//
// Past a bound the host answers with an explicit pending or unavailable
// condition; it never hosts fewer replicas than asked while claiming
// success.
//
// host must never import the client or the FUSE packages.
package host
