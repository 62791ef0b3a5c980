// Package host runs many replica workers in one process: admission bounds
// (workers, concurrent starts, shared HTTP operations, checkpoint captures,
// outbound rebuilds and their shared bandwidth), the host's two-phase
// record of which replicas it initialised and on which storage
// (history.go), the one-host-per-state-directory lock (lock.go), the wait for a
// data directory's bind, the reload of a running worker's credentials
// (credentials.go), the network handler (health, readiness, metrics,
// read-only status), the admin API served only on a local unix socket
// (admin.go, socket.go; docs/decisions/0003-host-admin-authority.md), and
// the standalone configuration that runs a host with no Kubernetes.
//
// Past a bound the host answers with an explicit pending or unavailable
// condition; it never hosts fewer replicas than asked while claiming
// success.
//
// host must never import the client or the FUSE packages.
package host
