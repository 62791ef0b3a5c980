//go:build tools

// Package tools pins crictl, which cluster-down.sh uses to stop every Pod
// sandbox through CRI (so CNI DEL runs and network namespaces are removed)
// before it stops a node's containerd.
package tools

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
