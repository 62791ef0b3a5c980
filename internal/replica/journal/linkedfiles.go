package journal

// Files kept beside checkpoints. A linked checkpoint (the state machine's
// format 2, docs/journal-format.md) stores in raft's state file only a
// manifest and keeps the backing files it names as hard links under
// checkpoints/files/<checkpoint ID>/. The store creates that directory for a
// sink (FilesDir), removes it with a cancelled sink and once raft reaped its
// checkpoint, and opens such a checkpoint through an Expander, which
// rebuilds the stream raft restores and sends to followers.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// checkpointFilesDir holds one directory of linked files per checkpoint.
const checkpointFilesDir = "files"

// Expander turns a checkpoint's stored state into the stream to restore or
// send, reading linked files from dir. linked false: state is that stream
// already and nothing of it was consumed.
type Expander func(state *bufio.Reader, dir string) (stream io.ReadCloser, size int64, linked bool, err error)

func (s *CheckpointStore) filesDir(id string) string {
	return filepath.Join(s.dir, checkpointFilesDir, id)
}

// FilesDir creates the sink's directory for linked files, durably: its
// entry and its parent's are synced before the files are linked.
func (d *durableSink) FilesDir() (string, error) {
	root := filepath.Dir(d.files)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("checkpoint %s files: %w", d.ID(), err)
	}
	if err := durable.SyncDir(filepath.Dir(root)); err != nil {
		return "", fmt.Errorf("checkpoint %s files: %w", d.ID(), err)
	}
	if err := os.RemoveAll(d.files); err != nil {
		return "", fmt.Errorf("checkpoint %s files: %w", d.ID(), err)
	}
	if err := os.Mkdir(d.files, 0o700); err != nil {
		return "", fmt.Errorf("checkpoint %s files: %w", d.ID(), err)
	}
	if err := durable.SyncDir(root); err != nil {
		return "", fmt.Errorf("checkpoint %s files: %w", d.ID(), err)
	}
	return d.files, nil
}

// Cancel drops the checkpoint and the files linked for it.
func (d *durableSink) Cancel() error {
	err := d.SnapshotSink.Cancel()
	if rerr := os.RemoveAll(d.files); rerr != nil && err == nil {
		err = fmt.Errorf("checkpoint %s: remove its files: %w", d.ID(), rerr)
	}
	return err
}

// reapFiles removes the linked files of checkpoints raft no longer keeps
// (reaped, cancelled, or left by a crash). The files directories are listed
// before the checkpoints, so a sink created meanwhile is never reaped: its
// checkpoint directory (ID.tmp) exists before its files directory does.
// With inProgress false (at open, when no sink can be in progress) an
// unfinished checkpoint's files go too: a crash left them.
func (s *CheckpointStore) reapFiles(inProgress bool) error {
	files, err := os.ReadDir(filepath.Join(s.dir, checkpointFilesDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list checkpoint files: %w", err)
	}
	snaps, err := os.ReadDir(filepath.Join(s.dir, raftSnapshotsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("list checkpoints: %w", err)
	}
	live := make(map[string]bool, len(snaps))
	for _, e := range snaps {
		id, tmp := strings.CutSuffix(e.Name(), ".tmp")
		if !tmp || inProgress {
			live[id] = true
		}
	}
	for _, e := range files {
		if live[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.dir, checkpointFilesDir, e.Name())); err != nil {
			return fmt.Errorf("remove files of reaped checkpoint %s: %w", e.Name(), err)
		}
	}
	return nil
}

// openState opens a checkpoint through raft's store (metadata, CRC-64 of
// the state file) and expands a linked one; its metadata's Size is then the
// expanded stream's, which raft sends as InstallSnapshot's size.
func (s *CheckpointStore) openState(id string) (*raft.SnapshotMeta, io.ReadCloser, bool, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil || s.expand == nil {
		return meta, rc, false, err
	}
	br := bufio.NewReaderSize(rc, 64<<10)
	stream, size, linked, err := s.expand(br, s.filesDir(id))
	if err != nil {
		rc.Close()
		return nil, nil, false, fmt.Errorf("open checkpoint %s: %w", id, err)
	}
	if !linked {
		return meta, &bufferedState{Reader: br, c: rc}, false, nil
	}
	rc.Close() // the manifest is read in full
	m := *meta
	m.Size = size
	return &m, stream, true, nil
}

type bufferedState struct {
	*bufio.Reader
	c io.Closer
}

func (b *bufferedState) Close() error { return b.c.Close() }
