package journal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

type filesSink interface {
	raft.SnapshotSink
	FilesDir() (string, error)
}

// linkedSink creates a checkpoint sink with one file in its files
// directory; the checkpoint is left unfinished.
func linkedSink(t *testing.T, s *CheckpointStore, index uint64) (filesSink, string) {
	t.Helper()
	sink, err := s.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	fsink, ok := sink.(filesSink)
	if !ok {
		t.Fatal("the store's sink keeps no files directory")
	}
	dir, err := fsink.FilesDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "64"), []byte("linked"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fsink, dir
}

// A checkpoint's linked files live as long as raft keeps the checkpoint:
// those of a cancelled one and of one a crash left unfinished are removed,
// those of kept ones stay, and those of reaped ones go with them.
func TestCheckpointFilesGoWithTheirCheckpoint(t *testing.T) {
	root := t.TempDir()
	open := func() *CheckpointStore {
		s, err := OpenCheckpoints(root, 2, hclog.NewNullLogger(), nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	exists := func(dir string) bool {
		_, err := os.Stat(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return err == nil
	}
	s := open()
	cancelled, cancelledDir := linkedSink(t, s, 10)
	if err := cancelled.Cancel(); err != nil {
		t.Fatal(err)
	}
	if exists(cancelledDir) {
		t.Fatal("a cancelled checkpoint's files were kept")
	}
	var kept []string
	for _, index := range []uint64{20, 30, 40} {
		sink, dir := linkedSink(t, s, index)
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, dir)
	}
	if exists(kept[0]) || !exists(kept[1]) || !exists(kept[2]) {
		t.Fatalf("files of checkpoints 20, 30, 40 present: %v %v %v; want the two raft keeps (30, 40)",
			exists(kept[0]), exists(kept[1]), exists(kept[2]))
	}
	_, unfinished := linkedSink(t, s, 50) // a crash before Close
	if !exists(unfinished) {
		t.Fatal("an unfinished checkpoint's files were reaped while it was being written")
	}
	open()
	if exists(unfinished) {
		t.Fatal("the files of a checkpoint a crash left unfinished survived reopening the store")
	}
	if !exists(kept[1]) || !exists(kept[2]) {
		t.Fatal("reopening the store removed a kept checkpoint's files")
	}
}
