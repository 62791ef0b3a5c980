// Package chartcheck holds `make chart-check`: tests that render the Helm chart
// in charts/cellfleet with a real helm binary (built from the version pinned
// in hack/tools/go.mod) and hold it to the files it must never drift from:
// the generated CRDs in config/crd/bases, the generated roles in
// config/rbac/{fleet,manager}/role.yaml (seed 002 requires the RBAC to be
// exactly as narrow as the markers say) and the manager's flags in
// cmd/manager/flags.go.
//
// It lives in the hack/tools module so that helm and its dependencies never
// reach the root module, and it must never import the root module's packages:
// it reads the repository's files as a user's cluster would receive them.
package chartcheck
