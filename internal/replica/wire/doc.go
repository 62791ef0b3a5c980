// Package wire defines the replicated volume's operations, results and the
// binary codec shared by the client RPC protocol and the Raft log entries.
//
// One encoding serves both paths so that what a client sends is exactly what
// the coordinator proposes: the coordinator only stamps the fields it owns
// (time and new inode numbers) before proposing. Every decoder is bounded:
// sizes are checked against the limits below before anything is allocated,
// so malformed or oversized input is rejected with an error, never a panic.
//
// wire owns no I/O and no state. It must never import raft, the state
// machine, the transport or the client.
package wire
