//go:build tools

// Package tools pins the Kubernetes release whose kube-apiserver the envtest
// suites run against. It is its own module (built with GOWORK=off) because
// k8s.io/kubernetes replaces its staging modules with local paths; go.mod
// here replaces each with the matching published v0.37.x instead.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
