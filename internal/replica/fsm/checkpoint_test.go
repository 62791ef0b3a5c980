package fsm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/chunkstore"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// chunkFiles counts the chunk files the store holds for ino.
func (h *harness) chunkFiles(ino uint64) int {
	h.t.Helper()
	ents, err := os.ReadDir(filepath.Join(h.f.opt.Dir, storeDir, "chunks", strconv.FormatUint(ino, 16)))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return len(ents)
}

// chunkSource serves the chunks of src's kept manifests, as the replica
// that sent a checkpoint does, and counts them; corrupt flips a byte of
// each chunk it sends.
type chunkSource struct {
	t       testing.TB
	src     *FSM
	sent    atomic.Int64
	corrupt bool
}

func chunksOf(t testing.TB, src *FSM) *chunkSource { return &chunkSource{t: t, src: src} }

func (c *chunkSource) FetchChunk(_ context.Context, m *chunkstore.Manifest, e chunkstore.Entry) ([]byte, error) {
	data, err := c.src.ManifestChunk(m.ID, e.Ino, e.Index)
	if err != nil {
		return nil, err
	}
	c.sent.Add(1)
	if c.corrupt && len(data) > 0 {
		data[len(data)/2] ^= 0xff
	}
	return data, nil
}

// checkpointBytes takes a checkpoint of h into memory.
func checkpointBytes(t *testing.T, h *harness) []byte {
	t.Helper()
	return persistBytes(t, h.f)
}

// persistBytes takes a checkpoint of f into memory.
func persistBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

func digestOf(t *testing.T, h *harness) string {
	t.Helper()
	_, d, err := h.f.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A checkpoint names chunks instead of holding the files' bytes, and a
// replica restoring its own checkpoint (a restart) copies nothing: the
// store keeps the manifest and every chunk it names, whatever was written
// after it. No chunk source is configured, so a fetch would fail.
func TestACheckpointHoldsNoFileDataAndItsReplicaRestoresItWithoutCopying(t *testing.T) {
	h := newHarness(t, Limits{})
	f := h.mk(wire.KindCreate, wire.RootIno, "f")
	h.fill(f, pattern(4<<20))
	want := digestOf(t, h)
	ckpt := checkpointBytes(t, h)
	if len(ckpt) > 64<<10 {
		t.Fatalf("the checkpoint of a 4 MiB file is %d bytes: the file's bytes were copied into it", len(ckpt))
	}
	h.fill(f, bytes.Repeat([]byte("later"), 1<<20))
	h.do(wire.Op{Kind: wire.KindWrite, Ino: f, Offset: 5 << 20, Data: []byte("grown")})
	copied := h.f.store.Stats().Copied
	if err := h.f.Restore(io.NopCloser(bytes.NewReader(ckpt))); err != nil {
		t.Fatalf("restore the replica's own checkpoint: %v", err)
	}
	if got := digestOf(t, h); got != want {
		t.Fatalf("restored digest %s, want the checkpoint's %s", got, want)
	}
	if n := h.f.store.Stats().Copied - copied; n != 0 {
		t.Fatalf("restoring a kept checkpoint copied %d chunks", n)
	}
}

// A checkpoint received from another replica installs only the chunks this
// replica lacks: all of them the first time, then only the one changed.
// A chunk that does not match its manifest is refused, and the restore
// leaves the installed state as it was.
func TestACheckpointFromAnotherReplicaFetchesOnlyTheChunksItLacks(t *testing.T) {
	src := newHarness(t, Limits{})
	a := src.mk(wire.KindCreate, wire.RootIno, "a")
	b := src.mk(wire.KindCreate, wire.RootIno, "b")
	src.fill(a, pattern(4<<20))
	src.fill(b, pattern(3<<20+5))
	chunks := chunksOf(t, src.f)
	dst := newHarness(t, Limits{})
	dst.f.opt.Chunks = chunks

	restore := func(want string, fetched int64) {
		t.Helper()
		before := chunks.sent.Load()
		if err := dst.f.Restore(io.NopCloser(bytes.NewReader(checkpointBytes(t, src)))); err != nil {
			t.Fatalf("restore: %v", err)
		}
		if got := digestOf(t, dst); got != want {
			t.Fatalf("restored digest %s, want %s", got, want)
		}
		if n := chunks.sent.Load() - before; n != fetched {
			t.Fatalf("the restore fetched %d chunks, want %d", n, fetched)
		}
	}
	restore(digestOf(t, src), 8) // 4 + 4 chunks of 1 MiB
	src.do(wire.Op{Kind: wire.KindWrite, Ino: b, Offset: 1 << 20, Data: []byte("one chunk changed")})
	restore(digestOf(t, src), 1)

	src.do(wire.Op{Kind: wire.KindWrite, Ino: a, Offset: 0, Data: []byte("another change")})
	before := digestOf(t, dst)
	chunks.corrupt = true
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(checkpointBytes(t, src)))); !errors.Is(err, chunkstore.ErrCorrupt) {
		t.Fatalf("a damaged chunk must fail the restore, got %v", err)
	}
	if got := digestOf(t, dst); got != before {
		t.Fatalf("a refused restore changed the installed state")
	}
	chunks.corrupt = false
	restore(digestOf(t, src), 1)
}

// A checkpoint of an earlier format (format 1, streamed; format 2 opens as
// one) restores into the chunk store, leaving all-zero chunks as holes, and
// the next checkpoint is written in format 3.
func TestAStreamedCheckpointIsConvertedIntoChunks(t *testing.T) {
	src := t.TempDir()
	data := append(make([]byte, 2<<20), pattern(1<<20)...) // two zero chunks, then data
	if err := os.WriteFile(filepath.Join(src, "65"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Limits{})
	ino := h.mk(wire.KindCreate, wire.RootIno, "f")
	if ino != 0x65 {
		t.Fatalf("inode %d, the test wants 0x65", ino)
	}
	h.fill(ino, data)
	want := digestOf(t, h)
	meta := stateBytes(t, h)
	var stream bytes.Buffer
	s := &streamed{meta: meta, dir: src, files: []uint64{ino}, sizes: map[uint64]uint64{ino: uint64(len(data))}}
	if _, err := s.write(&stream); err != nil {
		t.Fatal(err)
	}
	dst := newHarness(t, Limits{})
	if err := dst.f.Restore(io.NopCloser(&stream)); err != nil {
		t.Fatalf("restore a format 1 stream: %v", err)
	}
	if got := digestOf(t, dst); got != want {
		t.Fatalf("converted digest %s, want %s", got, want)
	}
	if n := dst.chunkFiles(ino); n != 1 {
		t.Fatalf("the converted file holds %d chunks, want 1: its two zero chunks are holes", n)
	}
	if ckpt := checkpointBytes(t, dst); !bytes.HasPrefix(ckpt, chunkedMagic[:]) {
		t.Fatalf("the checkpoint after a conversion starts %q, want format 3", ckpt[:8])
	}
}

// stateBytes is h's encoded metadata, as a checkpoint holds it.
func stateBytes(t *testing.T, h *harness) []byte {
	t.Helper()
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	return snap.(*snapshot).meta
}

// Checkpoints go through the real checkpoint store; its retention and the
// chunk store's stay in step: chunks only a reaped checkpoint named are
// collected.
func TestChunksOfReapedCheckpointsAreCollected(t *testing.T) {
	h := newHarness(t, Limits{})
	f := h.mk(wire.KindCreate, wire.RootIno, "f")
	store := openStore(t, t.TempDir())
	for i := range 4 {
		h.fill(f, bytes.Repeat([]byte{byte(i + 1)}, 2<<20))
		checkpointThroughStore(t, h, store, nil)
	}
	// Two checkpoints kept, each naming two chunks of its own version, and
	// the live file naming the newest's.
	if n := h.chunkFiles(f); n != 4 {
		t.Fatalf("%d chunk files after four checkpoints of a rewritten 2 MiB file, want 4 (two kept checkpoints)", n)
	}
	if got := len(h.f.store.Manifests()); got != retainCheckpoints {
		t.Fatalf("the chunk store keeps %d manifests, want %d", got, retainCheckpoints)
	}
}

// raft's store opens a checkpoint through ExpandCheckpoint, at start (to
// restore it, and in journal.Usable) and to send it: a format 3 checkpoint
// opens as it is where the store holds every chunk it names, and not where
// its chunks are gone, so a starting replica falls back instead of failing
// to restore.
func TestACheckpointWhoseChunksAreGoneDoesNotOpen(t *testing.T) {
	h := newHarness(t, Limits{})
	f := h.mk(wire.KindCreate, wire.RootIno, "f")
	h.fill(f, pattern(2<<20+1))
	ckpt := checkpointBytes(t, h)
	open := func(on *FSM) ([]byte, error) {
		rc, _, linked, err := on.ExpandCheckpoint(bufio.NewReader(bytes.NewReader(ckpt)), t.TempDir())
		if err != nil {
			return nil, err
		}
		if !linked {
			t.Fatal("a format 3 state was passed through unread: the store was not asked")
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	got, err := open(h.f)
	if err != nil || !bytes.Equal(got, ckpt) {
		t.Fatalf("the replica that wrote the checkpoint opens %d bytes of %d, %v", len(got), len(ckpt), err)
	}
	other := newHarness(t, Limits{})
	if _, err := open(other.f); err == nil || !strings.Contains(err.Error(), "does not hold") {
		t.Fatalf("a replica without the checkpoint's chunks opened it (err %v)", err)
	}
}
