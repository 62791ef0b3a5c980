// Package publication owns exclusive publication beneath the consumer mount
// root (docs/csi.md, "Consumer mount root: exclusive publication"): the
// durable records that say which holder has a backing volume published there,
// the dedicated publication lock that keeps a second supervisor off the same
// root, and WaitForBind, which a consumer (the replica host) calls to wait
// until the bind is visible in its own mount namespace.
//
// A record is written and fsynced (file and directory) before the mount is
// made and removed only after the unmount, so after any crash either the
// record exists or no mount can: a crash leaves at worst a record with no
// mount, which blocks other publishers until a normal unpublication (an
// idempotent retry) removes it. Nothing acknowledged is ever unrecorded.
//
// It must never import gRPC or a driver package; the local driver maps its
// errors to CSI codes.
package publication
