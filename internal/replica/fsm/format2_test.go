package fsm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/journal"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// checkpointThroughStore takes a checkpoint of h into the real checkpoint
// store and returns its ID; wrap, when set, wraps the store's sink.
func checkpointThroughStore(t testing.TB, h *harness, store *journal.CheckpointStore, wrap func(raft.SnapshotSink) raft.SnapshotSink) string {
	t.Helper()
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink, err := store.Create(raft.SnapshotVersionMax, h.index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		sink = wrap(sink)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

func openStore(t testing.TB, dir string) *journal.CheckpointStore {
	t.Helper()
	s, err := journal.OpenCheckpoints(dir, 2, hclog.NewNullLogger(), nil, nil, ExpandCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>12)
	}
	return b
}

// fill writes data to ino in wire.MaxData pieces.
func (h *harness) fill(ino uint64, data []byte) {
	h.t.Helper()
	for off := 0; off < len(data); off += wire.MaxData {
		end := min(len(data), off+wire.MaxData)
		if r := h.do(wire.Op{Kind: wire.KindWrite, Ino: ino, Offset: uint64(off), Data: data[off:end]}); r.Errno != 0 {
			h.t.Fatalf("write at %d: errno %d", off, r.Errno)
		}
	}
}

// linkedCheckpoint writes a format 2 checkpoint of the files in dir (as
// replicas did before the chunk store): its state file and, beside it, the
// files it names, as ExpandCheckpoint finds them.
func linkedCheckpoint(t *testing.T, meta []byte, dir string, files []uint64) []byte {
	t.Helper()
	var out bytes.Buffer
	h := sha256.New()
	w := io.MultiWriter(&out, h)
	var n [4]byte
	w.Write(linkedMagic[:])
	binary.BigEndian.PutUint32(n[:], uint32(len(meta)))
	w.Write(n[:])
	w.Write(meta)
	for _, ino := range files {
		data, err := os.ReadFile(filepath.Join(dir, strconv.FormatUint(ino, 16)))
		if err != nil {
			t.Fatal(err)
		}
		var ent [linkedEntry]byte
		ent[0] = tagLinked
		binary.BigEndian.PutUint64(ent[1:9], ino)
		binary.BigEndian.PutUint64(ent[9:17], uint64(len(data)))
		binary.BigEndian.PutUint32(ent[17:21], crc32.Checksum(data, castagnoli))
		w.Write(ent[:])
	}
	w.Write([]byte{tagEnd})
	out.Write(h.Sum(nil))
	return out.Bytes()
}

// A linked checkpoint (format 2) opens as the format 1 stream, each file
// checked against its checksum as it is read, and restores into the chunk
// store; a damaged linked file fails the restore and leaves the state as
// it was.
func TestALinkedCheckpointOpensAsAStreamAndRestoresIntoChunks(t *testing.T) {
	h := newHarness(t, Limits{})
	f := h.mk(wire.KindCreate, wire.RootIno, "f")
	data := pattern(3<<20 + 7)
	h.fill(f, data)
	want := digestOf(t, h)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, strconv.FormatUint(f, 16)), data, 0o600); err != nil {
		t.Fatal(err)
	}
	state := linkedCheckpoint(t, stateBytes(t, h), dir, []uint64{f})
	open := func() io.ReadCloser {
		stream, _, linked, err := ExpandCheckpoint(bufio.NewReader(bytes.NewReader(state)), dir)
		if err != nil || !linked {
			t.Fatalf("expand a linked checkpoint: linked %v, %v", linked, err)
		}
		return stream
	}
	dst := newHarness(t, Limits{})
	if err := dst.f.Restore(open()); err != nil {
		t.Fatalf("restore a linked checkpoint: %v", err)
	}
	if got := digestOf(t, dst); got != want {
		t.Fatalf("restored digest %s, want %s", got, want)
	}

	other := newHarness(t, Limits{})
	other.mk(wire.KindCreate, wire.RootIno, "before")
	before := digestOf(t, other)
	fh, err := os.OpenFile(filepath.Join(dir, strconv.FormatUint(f, 16)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte{data[1000] ^ 0xff}, 1000); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	if err := other.f.Restore(open()); !errors.Is(err, ErrCheckpointCorrupt) {
		t.Fatalf("a checkpoint whose linked file was damaged must be refused, got %v", err)
	}
	if got := digestOf(t, other); got != before {
		t.Fatalf("a refused checkpoint changed the installed state")
	}
}

// A manifest that is not one is refused; a format 1 stream passes through
// untouched.
func TestExpandLeavesAStreamedCheckpointAlone(t *testing.T) {
	stream := append(append([]byte{}, streamMagic[:]...), "rest of a format 1 stream"...)
	br := bufio.NewReader(bytes.NewReader(stream))
	if _, _, linked, err := ExpandCheckpoint(br, t.TempDir()); linked || err != nil {
		t.Fatalf("a format 1 stream was taken for a manifest: linked %v, %v", linked, err)
	}
	if got, _ := io.ReadAll(br); !bytes.Equal(got, stream) {
		t.Fatalf("expanding consumed the format 1 stream: %q", got)
	}
	torn := append(append([]byte{}, linkedMagic[:]...), 0, 0, 0, 9, 'x')
	if _, _, _, err := ExpandCheckpoint(bufio.NewReader(bytes.NewReader(torn)), t.TempDir()); !errors.Is(err, ErrCheckpointCorrupt) {
		t.Fatalf("a torn manifest must be refused, got %v", err)
	}
}
