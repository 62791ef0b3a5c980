// Package raftnet is the worker's raft.Transport: hashicorp/raft's RPCs over
// a raft.StreamLayer (the worker's mutual-TLS port), with AppendEntries
// carried as a raw frame instead of msgpack.
//
// hashicorp/raft's NetworkTransport encodes every entry's payload through
// msgpack on the coordinator and decodes it on each follower into a fresh
// buffer per entry, a large share of the 1 MiB write path's processor time
// (docs/performance.md, "Data-path optimisations: what each buys"). Here the
// request's header fields and each entry's fixed fields are fixed-width
// integers, followed by the entries' Data and Extensions verbatim: the
// coordinator writes them from the entries' own buffers, a follower reads
// them straight into one buffer sized once per request. Every other RPC
// (votes, pre-votes, snapshots, timeout-now) and every response keeps raft's
// msgpack encoding: they are small or, for snapshots, a stream after a small
// header.
//
// Every connection opens with one version byte each way (frame.go), so a
// replica running raft's NetworkTransport, or a later version of this one,
// is refused with a message naming both versions instead of being misread.
//
// raftnet must never import the state machine, the journal or the host.
package raftnet
