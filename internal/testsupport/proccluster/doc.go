// Package proccluster is the one harness for tests that run replicated
// volumes as real processes: it builds the module's commands once per test
// binary (build.go), hands out loopback ports below the kernel's ephemeral
// range (ports.go), holds the fast Raft timing every such test runs with
// (timing.go), and starts, kills, pauses and inspects a volume of
// replica-host processes on loopback (cluster.go, status.go, proc.go). The
// process tests (internal/replica/processtest), the FUSE and mount owner
// tests, and the Kubernetes node stacks (internal/testenv/nodestack) build
// on it; docs/development.md describes those suites.
//
// It is test support: production code must never import it.
package proccluster
