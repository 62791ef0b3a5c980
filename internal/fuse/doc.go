// Package fuse is the POSIX filesystem an application sees of a replicated
// volume: a hanwen/go-fuse/v2 `fs` tree whose every operation is a call of the
// replicated engine's client (internal/replica/client).
//
// What it owns:
//   - the mapping of FUSE operations onto the inode-based client API, with
//     the kernel answers POSIX prescribes (node.go, namespace.go, file.go,
//     xattr.go);
//   - ownership of new nodes (the caller's UID, GID inheritance from setgid
//     directories); every other permission check is the kernel's, through
//     the default_permissions mount option (owner.go);
//   - open-but-unlinked files, which the engine frees at the last name: the
//     mount keeps them alive under a hidden orphan directory until the last
//     handle closes (orphans.go);
//   - write batching: concurrent writes are committed together in one engine
//     entry through WriteBatch (batch.go), and write-behind with per-handle
//     error reporting on single-writer volumes (writeback.go);
//   - cache settings: single-writer volumes let the kernel cache attributes,
//     entries and pages; shared volumes revalidate every time (options.go);
//   - fencing: a writable single-writer mount opens a fencing epoch before it
//     serves, and once a newer mount fences it, answers EIO to every request
//     and drops the kernel's caches (fence.go).
//
// Semantics (docs/fuse.md): on a shared volume a write returns only once the
// engine committed it on a quorum; on a single-writer volume it is queued
// (write-behind, writeback.go) and fsync and close wait for its commit, with
// a failure reported once to every file handle open when it happened. A
// mutation whose outcome the client cannot know is answered EIO (an
// uncertain result); FUSE interrupts never cancel a mutation in flight,
// because a cancelled mutation could still commit.
//
// fuse must never import the worker, the state machine, raft, the mount owner
// or anything Kubernetes.
package fuse
