// Package replica is the worker: one replica of one volume. It wires
// hashicorp/raft to the journal (its own segmented log plus checkpoints and
// the identity record), the deterministic file state machine and the
// worker's single TLS port, and serves client calls: mutations are stamped (time, inode numbers)
// and proposed by the coordinator; queries are answered by the coordinator
// after it verifies its leadership and its applied index covers the commit
// index seen at the read. Followers answer "not coordinator" with the
// current one. The coordinator also records each follower's acknowledged
// journal index (Raft's match index, observed on the transport) for the
// follower lag it reports.
//
// replica must never import the host, the client or anything Kubernetes.
package replica
