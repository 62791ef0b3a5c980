// Package chunkstore keeps a replica's file data as fixed-size chunks with
// copy-on-write per chunk, and persists captures of it as checkpoint
// manifests that name chunks instead of copying or linking files
// (docs/decisions/0010-chunked-store.md).
//
// It owns one directory:
//
//	<dir>/format                         "cellfleet chunk store 1", the chunk size
//	<dir>/chunks/<ino>/<index>.<version> one chunk of a file (hex numbers)
//	<dir>/manifests/<id>.manifest        a persisted capture (manifest.go)
//
// A file is a map chunk index → version, kept in memory only (it is local
// state, not replicated: the replicated state, file sizes included, is the
// caller's). A chunk missing from the map is a hole and reads as zeros.
// Versions and capture IDs come from one counter, the generation.
//
// Crash invariant (the assumptions of docs/journal-format.md): a manifest
// is written only after every chunk it names is fdatasync'd and its
// directory entries fsync'd, so a manifest present and verified at Open
// names only durable chunks; everything else under chunks/ is garbage at
// Open and is removed (the caller replays its journal on top of the
// newest verified manifest, as it does on top of a checkpoint today). A
// chunk a kept manifest or an unreleased capture names is never changed in
// place (cow.go).
//
// Every method is safe for concurrent use. Mutations are serialised (the
// state machine's apply); reads run concurrently with each other. After a
// mutation returns an error the store's live maps may not match what the
// caller believes it wrote: the caller stops applying (as fsm.fail does
// today) and restarts from the newest manifest.
//
// chunkstore must never import the state machine (internal/replica/fsm),
// the journal, the worker, the host, raft or the transport: it stores
// bytes; checkpoints, their retention and transfers are the callers'.
package chunkstore
