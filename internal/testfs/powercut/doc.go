// Package powercut is a FUSE filesystem for tests that simulates losing
// power: after Cut, a file holds only what it held at its last fsync or
// fdatasync, and a directory holds only the entries (creates, renames,
// unlinks, links) it held at its last fsync. It is the test tree's answer to
// "SIGKILL keeps the page cache": a missing fdatasync or a missing directory
// fsync is invisible to a kill -9 test and visible here.
//
// The model follows LazyFS (a FUSE layer whose own page cache keeps unsynced
// file data and drops it on its clear-cache fault), with the two kinds of
// state swapped: operations go straight through to a backing directory (the
// loopback node tree of go-fuse, so reads, writes and renames behave as on
// the real disk while mounted), and the layer keeps, per inode, the image a
// power cut would leave: file contents as of their last sync and directory
// entries as of their directory's last sync, plus the pages and entries
// changed since. Cut unmounts, rewrites the backing directory to that image
// (dropping everything unsynced) and mounts again. Unlike LazyFS it also
// models directory entries, and it has no torn-write fault: what was synced
// survives whole, what was not is gone whole (never a part of it).
//
// Hard links are supported; O_TMPFILE, mknod of devices and xattrs' own
// durability are not modelled (xattrs pass through and survive).
//
// powercut is test infrastructure: production code must never import it.
package powercut
