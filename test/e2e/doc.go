// Package e2e qualifies cellfleet on a real local multi-node cluster under
// continuous write load. It is its own module so the heavy client and
// cluster-tooling dependencies stay out of the root module.
package e2e
