// Package mux is a worker's single TLS port: it terminates TLS with
// the volume's own CA, routes each connection by ALPN to Raft (peers, mutual
// TLS, the peer's DNS SAN checked against the volume's replicas) or to the
// client RPC service (bearer token), and provides the raft.StreamLayer that
// dials peers with the SAN their certificate must carry.
//
// mux must never import the state machine, the host or the client.
package mux
