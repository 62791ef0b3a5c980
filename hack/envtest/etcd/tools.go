//go:build tools

// Package tools pins etcd for envtest: go.etcd.io/etcd/server/v3's module
// root is the etcd main package, and `go install` refuses it because of its
// replace directives, so this wrapper module builds it with GOWORK=off.
package tools

import _ "go.etcd.io/etcd/server/v3"
