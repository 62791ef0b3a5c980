//go:build tools

// Package tools pins the code generators and linters the Makefile runs. It is
// its own module (GOWORK=off) so their dependencies never reach the root
// module's go.mod.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
	_ "honnef.co/go/tools/cmd/staticcheck"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "sigs.k8s.io/kustomize/kustomize/v5"
)
