// Package chartcheck holds `make chart-check`: tests that render the Helm chart
// in charts/cellfleet with a real helm binary (built from the version pinned
// in hack/tools/go.mod) and hold it to the files it must never drift from:
// the generated CRDs in config/crd/bases, the role files the chart copies
// (roleFiles: generated ones under config/rbac and the hand-written sidecar
// and node-provisioner roles; the RBAC must be exactly as narrow as they
// say, docs/install.md), the manager's flags in cmd/manager/flags.go and
// csi-node's in cmd/csi-node. With -kustomize it holds the overlays under
// config/overlays to the same storage-half checks (make kustomize-check), and
// both the chart and config/overlays/local are installed on a real
// kube-apiserver (envtest).
//
// It lives in the hack/tools module so that helm and its dependencies never
// reach the root module, and it must never import the root module's packages:
// it reads the repository's files as a user's cluster would receive them.
package chartcheck
