package fuse

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// Where the kernel refuses the readahead window (no backing device entry,
// a read-only /sys in a container), SetReadAheadWindow says so and changes
// nothing: Mount logs it and serves with the kernel's 128 KiB window.
func TestARefusedReadAheadWindowIsReportedNotFatal(t *testing.T) {
	was := bdiRoot
	t.Cleanup(func() { bdiRoot = was })
	bdiRoot = t.TempDir() // no device entries: the write is refused
	target := t.TempDir()
	err := SetReadAheadWindow(target, ReadAheadWindow)
	if err == nil {
		t.Fatal("a readahead window the kernel refused was reported as set")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refusal lost its cause: %v", err)
	}
	entries, _ := filepath.Glob(filepath.Join(bdiRoot, "*"))
	if len(entries) != 0 {
		t.Fatalf("a refused window left %v behind", entries)
	}
}
