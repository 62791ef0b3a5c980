// Package mux is a worker's single TLS port: it terminates TLS with
// the volume's own CA, routes each connection by ALPN to Raft (peers, mutual
// TLS, the peer's DNS SAN checked against the volume's replicas) or to the
// client RPC service (bearer token), and provides the raft.StreamLayer that
// dials peers with the SAN their certificate must carry. Certificate, CA and
// token are one set read at each handshake and hello, which its owner may
// replace while the port serves (credentials.go).
//
// mux must never import the state machine, the host or the client.
package mux
