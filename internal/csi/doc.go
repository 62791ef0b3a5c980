// Package csi is the root of cellfleet's CSI servers: the node plugin
// (cmd/csi-node plugin) and the replicated driver's controller (cmd/manager).
// It holds no code; its sub-packages are:
//
//   - server: the gRPC unix-socket server, Identity service, health and metrics
//   - mountpath: safe resolution of kubelet-given target and staging paths
//   - publication: durable exclusive publication records and the publication lock
//   - local: the local.storage.eric.dev driver (Controller and Node)
//   - replicated: the replicated.storage.eric.dev Node side and its mount-owner client
//   - replicated/controller: the replicated driver's Controller service, served by
//     the manager (not by csi-node)
//
// See docs/csi.md for the behaviour these packages promise.
package csi
