// Package csi is the root of cellfleet's CSI node plugin (cmd/csi-node
// plugin). It holds no code; its sub-packages are:
//
//   - server: the gRPC unix-socket server, Identity service, health and metrics
//   - mountpath: safe resolution of kubelet-given target and staging paths
//   - publication: durable exclusive publication records and the publication lock
//   - local: the local.storage.eric.dev driver (Controller and Node)
//   - replicated: the replicated.storage.eric.dev Node side and its mount-owner client
//
// See docs/csi.md for the behaviour these packages promise.
package csi
