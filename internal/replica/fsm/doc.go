// Package fsm is the replicated volume's deterministic file state machine.
//
// It applies committed journal entries (wire.Entry) to ordinary backing files
// (one file per regular inode under tree/) and an in-memory metadata store
// (directories, attributes, symlinks, xattrs, the exactly-once session
// table), and answers queries from that state. Everything an entry changes is
// a function of the entry and the previous state: inode numbers and times come
// from the entry (stamped by the coordinator), sessions are evicted by log
// index, and capacity is accounted in logical bytes. The capacity and the
// session table's size are themselves replicated state (limits.go), never
// a replica's own configuration.
//
// Durability is the journal's and the checkpoint's, not the tree's: on every
// start the tree is discarded and rebuilt from the latest verified checkpoint
// plus the journal tail, so a crash at any point during apply leaves nothing
// to repair and replay is idempotent by construction (see
// docs/journal-format.md).
//
// fsm implements raft.FSM. It must never import the worker, the transport,
// the host or the client.
package fsm
