package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// restoredDigest opens checkpoint id of store (every linked file checked
// against its checksum as it streams), restores it into a new state
// machine and returns that state's digest.
func restoredDigest(t *testing.T, store *journal.CheckpointStore, id string) string {
	t.Helper()
	_, rc, err := store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatalf("read checkpoint %s (each linked file is checked against its checksum): %v", id, err)
	}
	h := newHarness(t, Limits{})
	if err := h.f.Restore(io.NopCloser(bytes.NewReader(stream))); err != nil {
		t.Fatalf("restore checkpoint %s: %v", id, err)
	}
	_, got, err := h.f.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return got
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

// A checkpoint through the store links the backing files instead of
// writing their bytes into raft's state file, keeps the bytes it linked
// while the tree is written on, and opens as the stream Restore reads.
func TestLinkedCheckpointWritesNoFileDataAndRestoresWhatItCaptured(t *testing.T) {
	h := newHarness(t, Limits{})
	f := h.mk(wire.KindCreate, wire.RootIno, "f")
	h.mk(wire.KindCreate, wire.RootIno, "never-written")
	h.fill(f, pattern(4<<20))
	_, want, err := h.f.Digest()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store := openStore(t, dir)
	id := checkpointThroughStore(t, h, store, nil)

	st, err := os.Stat(filepath.Join(dir, journal.CheckpointDir, "snapshots", id, "state.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 64<<10 {
		t.Fatalf("the checkpoint of a 4 MiB file wrote %d bytes of state: the file's data was copied, not linked", st.Size())
	}
	// The tree is written after the checkpoint: copy-on-write must keep
	// the checkpoint's bytes.
	h.do(wire.Op{Kind: wire.KindWrite, Ino: f, Offset: 1 << 20, Data: []byte("written after the checkpoint")})

	meta, rc, err := store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(stream)) != meta.Size {
		t.Fatalf("the opened checkpoint streamed %d bytes but its metadata says %d (raft sends that size to followers)", len(stream), meta.Size)
	}
	other := newHarness(t, Limits{})
	if err := other.f.Restore(io.NopCloser(bytes.NewReader(stream))); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := other.f.Digest(); got != want {
		t.Fatalf("restored digest %s, want the state at the checkpoint %s", got, want)
	}

	// A damaged linked file fails the stream: the restore is refused and
	// the installed state stays.
	linked := filepath.Join(dir, journal.CheckpointDir, "files", id, strconv.FormatUint(f, 16))
	fh, err := os.OpenFile(linked, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte{0xFF}, 12345); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	_, rc, err = store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	third := newHarness(t, Limits{})
	_, before, _ := third.f.Digest()
	if err := third.f.Restore(rc); !errors.Is(err, ErrCheckpointCorrupt) {
		t.Fatalf("a checkpoint whose linked file was damaged must be refused, got %v", err)
	}
	if _, after, _ := third.f.Digest(); after != before {
		t.Fatalf("a refused checkpoint changed the installed state")
	}
}

// checkpointAndRestore checkpoints h's tree through a new store, checks
// that the checkpoint restores to the digest the tree had, and returns the
// store, the checkpoint and the bytes the checkpoint read.
func checkpointAndRestore(t *testing.T, h *harness) (store *journal.CheckpointStore, id string, read uint64) {
	t.Helper()
	_, want, err := h.f.Digest()
	if err != nil {
		t.Fatal(err)
	}
	store = openStore(t, t.TempDir())
	r0 := readBytes(t)
	id = checkpointThroughStore(t, h, store, nil)
	read = uint64(readBytes(t) - r0)
	if got := restoredDigest(t, store, id); got != want {
		t.Fatalf("restored digest %s, want %s", got, want)
	}
	return store, id, read
}

// readBytes is the bytes this process has read so far (/proc/self/io).
func readBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io to count the bytes a checkpoint reads: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no rchar in /proc/self/io: %q", b)
	return 0
}

// A checkpoint reads what changed since the last one: a file whose inode
// the previous checkpoint linked is not read again, a written one is. Old
// checkpoints' links go with them. (The file is not written in order from
// its start: the checksum of such a file is kept by the apply and not
// read, seqsum_test.go.)
func TestLinkedCheckpointReadsOnlyTheFilesChangedSinceTheLast(t *testing.T) {
	const size = 16 << 20
	h := newHarness(t, Limits{})
	f := h.mk(wire.KindCreate, wire.RootIno, "f")
	h.fill(f, pattern(size))
	h.do(wire.Op{Kind: wire.KindWrite, Ino: f, Offset: 1, Data: []byte("out of order")})
	dir := t.TempDir()
	store := openStore(t, dir)

	measure := func(what string) int64 {
		r0 := readBytes(t)
		checkpointThroughStore(t, h, store, nil)
		n := readBytes(t) - r0
		t.Logf("%s: %d bytes read", what, n)
		return n
	}
	if n := measure("first checkpoint"); n < size {
		t.Fatalf("the first checkpoint read %d bytes, want the file's %d checksummed", n, size)
	}
	if n := measure("second checkpoint, file unchanged"); n >= 1<<20 {
		t.Fatalf("a checkpoint of an unchanged %d-byte file read %d bytes: it checksummed the file again", size, n)
	}
	h.do(wire.Op{Kind: wire.KindWrite, Ino: f, Offset: 5, Data: []byte("changed")})
	if n := measure("third checkpoint, file written"); n < size {
		t.Fatalf("a checkpoint of a written file read %d bytes, want its %d checksummed", n, size)
	}
	ents, err := os.ReadDir(filepath.Join(dir, journal.CheckpointDir, "files"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 {
		t.Fatalf("%d checkpoints' files kept, want the 2 the store retains", len(ents))
	}
}

// A manifest that is not one is refused; a format 1 stream passes through
// untouched.
func TestExpandLeavesAStreamedCheckpointAlone(t *testing.T) {
	stream := append(append([]byte{}, checkpointMagic[:]...), "rest of a format 1 stream"...)
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
