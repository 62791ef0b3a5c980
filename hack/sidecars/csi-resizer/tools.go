//go:build tools

// Package tools pins the csi-resizer sidecar that runs beside the manager for
// the replicated driver. It is its own module (built with GOWORK=off,
// hack/cluster/images.sh) so the sidecar is built with exactly the
// dependency versions its own go.mod names, not the ones cellfleet uses.
package tools

import _ "github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer"
