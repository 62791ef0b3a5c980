//go:build tools

// Package tools pins the csi-provisioner sidecar that the manager Deployment
// (replicated driver) and the NODE DaemonSet (local driver, --node-deployment)
// run. It is its own module (built with GOWORK=off, hack/cluster/images.sh)
// because external-provisioner requires k8s.io/kubernetes, whose staging
// modules only resolve through the replace lines copied here from its go.mod.
package tools

import _ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
