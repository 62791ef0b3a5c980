//go:build tools

// Package deps pins the core modules in go.mod until code imports them all.
package deps

import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/container-storage-interface/spec/lib/go/csi"
	_ "github.com/hanwen/go-fuse/v2/fs"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-wal"
	_ "github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)
