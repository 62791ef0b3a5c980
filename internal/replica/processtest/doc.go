// Package processtest holds the replicated volume engine's process tests:
// replica-host binaries built once per run, started on loopback with real
// data directories, killed with SIGKILL, partitioned through a
// fault-injecting TCP proxy, and checked for lost acknowledged writes,
// divergence and linearizability (porcupine). It has no non-test code.
//
// processtest must never be imported.
package processtest
