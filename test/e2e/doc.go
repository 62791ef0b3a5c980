// Package e2e qualifies cellfleet's fleet operator on a real local multi-node
// cluster (hack/cluster, docs/local-cluster.md) under continuous write load:
// the scenarios docs/qualification.md records, each starting from a clean
// fleet of the celldsim test workload, each ending by reading every
// acknowledged write back through the fleet's Service and by checking, from
// the API server's audit log, that the operator deleted only what the
// scenario allows.
//
// The suites are Go tests run by `make e2e`. Without E2E=1 they skip; with
// it, a missing cluster fails the run. Package cluster reaches the cluster,
// package load drives the writes and keeps the ledger. It is its own module
// so client and cluster-tooling dependencies stay out of the root module; it
// imports the API types but never the operator's code.
package e2e
