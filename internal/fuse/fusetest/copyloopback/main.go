// Command copyloopback is go-fuse's loopback example without FUSE
// passthrough: a benchmark baseline (internal/fuse, loopback_test.go).
//
// Run by root on Linux 6.9 or later, go-fuse's own example opens every file
// in passthrough mode (FOPEN_PASSTHROUGH): the kernel then reads and writes
// the backing file itself, and the data never reaches the example's
// process. That makes the example the ceiling of a FUSE mount whose files
// are local. A FUSE server that produces the data (as cellfleet's mount
// does, from the replicas) gets every READ and WRITE with its bytes, so its
// ceiling is this: the same loopback, each file handle refusing
// passthrough, so every byte is copied through /dev/fuse and this process.
//
// It negotiates the request sizes and the readahead window of cellfleet's
// mount, so both meet the kernel on the same terms.
//
// Usage: copyloopback MOUNTPOINT ORIGINAL
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
)

// node is a loopback node whose file handles refuse passthrough.
type node struct{ *fs.LoopbackNode }

// WrapChild makes every node of the tree a node.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{ops.(*fs.LoopbackNode)}
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return copying(fh), fl, errno
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, copying(fh), fl, errno
}

// copyingFile is a loopback file handle that refuses passthrough; every
// other operation is the loopback's.
type copyingFile struct{ *fs.LoopbackFile }

// PassthroughFd refuses: go-fuse then answers the open without a backing
// file, and the kernel sends READ and WRITE.
func (copyingFile) PassthroughFd() (int, bool) { return -1, false }

func copying(fh fs.FileHandle) fs.FileHandle {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		return copyingFile{lf}
	}
	return fh
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: copyloopback MOUNTPOINT ORIGINAL")
		os.Exit(2)
	}
	target, orig := os.Args[1], os.Args[2]
	root, err := fs.NewLoopbackRoot(orig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loopback root %s: %v\n", orig, err)
		os.Exit(1)
	}
	lr := root.(*fs.LoopbackNode)
	wrapped := &node{lr}
	lr.RootData.RootNode = wrapped
	// The example's options (example/loopback/main.go), with -directmount.
	sec := time.Second
	server, err := fs.Mount(target, wrapped, &fs.Options{
		AttrTimeout:     &sec,
		EntryTimeout:    &sec,
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			DirectMount:  true,
			FsName:       orig,
			Name:         "copyloopback",
			MaxWrite:     cfuse.MaxWrite,
			MaxReadAhead: cfuse.MaxReadAhead,
			// A 1 MiB READ's reply does not fit the pipe splice(2) would
			// carry it in: header, data and a spare page exceed the default
			// fs.pipe-max-size (1 MiB). Every READ then failed its splice,
			// logged "trySplice: ...", and fell back to the copy a server
			// that produces its data makes anyway; the copy alone is the
			// ceiling this process stands for.
			DisableSplice: true,
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "mount %s: %v\n", target, err)
		os.Exit(1)
	}
	if err := cfuse.SetReadAheadWindow(target, cfuse.ReadAheadWindow); err != nil {
		fmt.Fprintf(os.Stderr, "readahead window of %s: %v\n", target, err)
		_ = server.Unmount()
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		_ = server.Unmount()
	}()
	server.Wait()
}
