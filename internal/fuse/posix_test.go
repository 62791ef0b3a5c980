package fuse_test

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
)

// posixExceptions are posixtest cases that fail on the local ext4 disk of
// this very machine as well, because they test a loopback filesystem's
// implementation rather than POSIX.
var posixExceptions = map[string]string{
	// POSIX record locks belong to a process: the same process locking the
	// same file through a second descriptor succeeds on every Linux
	// filesystem (go-fuse's own TestAll skips it too). Cross-process lock
	// conflicts are proved by TestOperations ("... locks conflict between
	// processes").
	"FcntlFlockLocksFile": "expects a per-descriptor conflict that POSIX locks do not have; fails on ext4",
}

// TestPosixSuiteOnReplicatedMount runs go-fuse's posixtest.All on a mount of
// a three-replica volume, for both cache modes.
func TestPosixSuiteOnReplicatedMount(t *testing.T) {
	c := startCluster(t, 1<<30)
	for _, mode := range []struct {
		name         string
		singleWriter bool
	}{{"single-writer", true}, {"shared", false}} {
		t.Run(mode.name, func(t *testing.T) {
			mnt := filepath.Join(c.mount(t, cfuse.Options{SingleWriter: mode.singleWriter}), mode.name)
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			names := make([]string, 0, len(posixtest.All))
			for k := range posixtest.All {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, name := range names {
				t.Run(name, func(t *testing.T) {
					if why, ok := posixExceptions[name]; ok {
						t.Skip(why)
					}
					sub := filepath.Join(mnt, name)
					if err := os.Mkdir(sub, 0o755); err != nil {
						t.Fatalf("mkdir %s: %v", sub, err)
					}
					posixtest.All[name](t, sub)
				})
			}
		})
	}
}
