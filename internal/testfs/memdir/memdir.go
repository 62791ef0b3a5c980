// Package memdir makes temporary directories in memory (tmpfs) for test
// state whose writes must not queue on the machine's disk: on CI's 2-core
// machine two test packages run at once, and the page-cache writeback of one
// (a replica suite rewriting gigabytes) held back every other writer on the
// disk, envtest's etcd and other suites' Raft journals among them.
//
// This package is imported by tests only; production code must never import it.
package memdir

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// shm is the tmpfs every Linux machine of this project's kinds mounts.
const shm = "/dev/shm"

// MkdirTemp is os.MkdirTemp on tmpfs when /dev/shm is writable, and in
// os.TempDir otherwise. The caller removes the directory.
func MkdirTemp(pattern string) (string, error) {
	base := os.TempDir()
	if unix.Access(shm, unix.W_OK) == nil {
		base = shm
	}
	d, err := os.MkdirTemp(base, pattern)
	if err != nil {
		return "", fmt.Errorf("temporary directory for %s: %w", pattern, err)
	}
	return d, nil
}
