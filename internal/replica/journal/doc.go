// Package journal owns a replica's durable authority on disk: the Raft log
// and stable store (its own segmented, checksummed journal; see
// docs/decisions/0001-log-store.md), the checkpoint store, and the
// identity record (volume, replica, generation) kept beside them.
//
// It decides, before anything is opened for writing, whether a replica may
// start: a replica that was ever recorded but whose identity or journal is
// missing or truncated is lost (ReplicaStateLost, data extent unknown) and is
// never initialised afresh. docs/journal-format.md describes the files and
// what survives which crash.
//
// journal must never import the state machine, the worker, the transport or
// the host.
package journal
