package fsm

// Restoring a format 3 checkpoint (checkpoint.go). One this replica wrote
// names a manifest its chunk store keeps: restoring it copies nothing. One
// received from another replica (raft's InstallSnapshot carries only the
// state file) names chunks of that replica's store: this store installs the
// ones it lacks, fetched through Options.Chunks and verified against the
// manifest, and adopts the manifest under its own chunk names
// (docs/decisions/0010-chunked-store.md, "Follower transfer").

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"github.com/cellfleet/cellfleet/internal/replica/chunkstore"
)

// ChunkSource fetches, from the replica that sent a checkpoint, the bytes
// of one chunk its manifest names. The bytes are checked by the store
// before they are installed.
type ChunkSource interface {
	FetchChunk(ctx context.Context, m *chunkstore.Manifest, e chunkstore.Entry) ([]byte, error)
}

// ExpandCheckpoint opens a stored checkpoint state for raft's store
// (journal.Expander): a linked one (format 2) as the format 1 stream
// (format2.go), and a format 3 one as it is, once its checksum verifies and
// this replica's chunk store holds every chunk it names. A checkpoint whose
// chunks are gone cannot be restored without a coordinator to fetch them
// from, which a replica starting has not: raft then falls back to an older
// checkpoint, and journal.Usable judges whether the journal still follows
// that one. Once raft has started (Started), a checkpoint is opened only to
// restore one the coordinator sent, and Restore fetches what it lacks.
func (f *FSM) ExpandCheckpoint(state *bufio.Reader, dir string) (io.ReadCloser, int64, bool, error) {
	magic, err := state.Peek(len(chunkedMagic))
	if err != nil || !bytes.Equal(magic, chunkedMagic[:]) {
		return ExpandCheckpoint(state, dir)
	}
	b, err := io.ReadAll(io.LimitReader(state, int64(maxChunkedState)+1))
	if err != nil {
		return nil, 0, true, fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
	}
	if len(b) > maxChunkedState {
		return nil, 0, true, fmt.Errorf("%w: state of more than %d bytes", ErrCheckpointCorrupt, maxChunkedState)
	}
	_, m, err := readChunked(bytes.NewReader(b))
	if err != nil {
		return nil, 0, true, err
	}
	if missing := f.store.Missing(m); len(missing) > 0 && !f.fetching.Load() {
		return nil, 0, true, fmt.Errorf("checkpoint of index %d names %d chunks this replica's chunk store does not hold (first: chunk %d of inode %d)",
			m.Index, len(missing), missing[0].Index, missing[0].Ino)
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), true, nil
}

// maxChunkedState bounds a format 3 state file read whole.
const maxChunkedState = len(chunkedMagic) + 4 + maxMeta + 4 + maxManifest + sha256.Size

// ManifestChunk returns chunk idx of inode ino as the kept manifest id
// names it, checked against its SHA-256: the bytes a follower restoring a
// checkpoint this replica sent fetches (its FetchChunk).
func (f *FSM) ManifestChunk(id, ino, idx uint64) ([]byte, error) {
	view, err := f.store.OpenManifest(id)
	if err != nil {
		return nil, err
	}
	defer view.Release()
	return view.ReadChunk(ino, idx)
}

func (f *FSM) restoreChunked(r io.Reader) error {
	st, m, err := readChunked(r)
	if err != nil {
		return fmt.Errorf("restore checkpoint: %w", err)
	}
	if kept, ok := f.store.Manifest(m.ID); ok && bytes.Equal(kept.Encode(), m.Encode()) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if err := f.store.Restore(m.ID); err != nil && !errors.Is(err, chunkstore.ErrCollect) {
			return fmt.Errorf("restore checkpoint of index %d: %w", m.Index, err)
		} else if err != nil {
			f.log.Warn("collecting the chunk store's unreferenced chunks failed", "error", err)
		}
		f.install(st)
		return nil
	}
	if err := f.fetchMissing(m); err != nil {
		return fmt.Errorf("restore checkpoint of index %d: %w", m.Index, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.store.Adopt(m); err != nil && !errors.Is(err, chunkstore.ErrCollect) {
		return fmt.Errorf("restore checkpoint of index %d: %w", m.Index, err)
	} else if err != nil {
		f.log.Warn("collecting the chunk store's unreferenced chunks failed", "error", err)
	}
	f.install(st)
	return nil
}

// fetchMissing installs the chunks of m this store lacks. Until Adopt,
// nothing of the live state changes.
func (f *FSM) fetchMissing(m *chunkstore.Manifest) error {
	missing := f.store.Missing(m)
	if len(missing) == 0 {
		return nil
	}
	if f.opt.Chunks == nil {
		return fmt.Errorf("%d chunks are missing and no replica to fetch them from is configured", len(missing))
	}
	ctx := context.Background()
	for _, e := range missing {
		data, err := f.opt.Chunks.FetchChunk(ctx, m, e)
		if err != nil {
			return fmt.Errorf("fetch chunk %d of inode %d: %w", e.Index, e.Ino, err)
		}
		if err := f.store.Install(m, e, data); err != nil {
			return err
		}
	}
	return nil
}
