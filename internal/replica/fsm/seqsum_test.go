package fsm

import (
	"bytes"
	"hash/crc32"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// A checkpoint takes the checksum of a file written in order from its start
// from the apply instead of reading the file, and of a file whose writes
// past its end left a hole, the checksum of the bytes before the hole,
// reading only the rest; any other change of a file (a rewrite, a
// truncate, an allocation, a write after the file was restored) makes the
// checkpoint read it. The checksums kept must equal the files' bytes: the
// restore verifies each linked file against its checksum and refuses the
// checkpoint otherwise.
func TestCheckpointKeepsTheChecksumOfFilesWrittenInOrderAndReadsTheRest(t *testing.T) {
	const size = 8 << 20
	h := newHarness(t, Limits{})
	inOrder := h.mk(wire.KindCreate, wire.RootIno, "in-order")
	h.fill(inOrder, pattern(size))
	appended := h.mk(wire.KindCreate, wire.RootIno, "appended")
	for range 3 {
		if r := h.do(wire.Op{Kind: wire.KindWrite, Ino: appended, Flags: wire.WriteAppend, Data: pattern(1 << 20)}); r.Errno != 0 {
			t.Fatalf("append: errno %d", r.Errno)
		}
	}
	var changed uint64
	for _, c := range []struct {
		name    string
		changes []wire.Op
		kept    uint64 // first bytes whose checksum the apply keeps
	}{
		{"rewritten", []wire.Op{{Kind: wire.KindWrite, Offset: 5, Data: []byte("rewritten")}}, 0},
		{"with a hole", []wire.Op{{Kind: wire.KindWrite, Offset: size + 1, Data: []byte("past a hole")}}, size},
		{"truncated", []wire.Op{{Kind: wire.KindTruncate, Size: size - 3}}, 0},
		{"extended by a truncate", []wire.Op{{Kind: wire.KindTruncate, Size: size + 4096}}, 0},
		{"truncated and extended back", []wire.Op{{Kind: wire.KindTruncate, Size: size - 4096}, {Kind: wire.KindTruncate, Size: size}}, 0},
		{"punched", []wire.Op{{Kind: wire.KindFallocate, Offset: 4096, Size: 8192, Flags: wire.FallocKeepSize | wire.FallocPunchHole}}, 0},
		{"allocated", []wire.Op{{Kind: wire.KindFallocate, Offset: 0, Size: size + 8192}}, 0},
	} {
		ino := h.mk(wire.KindCreate, wire.RootIno, c.name)
		h.fill(ino, pattern(size))
		var r wire.Result
		for _, op := range c.changes {
			op.Ino = ino
			if r = h.do(op); r.Errno != 0 {
				t.Fatalf("%s: errno %d", c.name, r.Errno)
			}
		}
		// A write in order after the change does not make the file one
		// written in order again.
		h.do(wire.Op{Kind: wire.KindWrite, Ino: ino, Offset: r.Attr.Size, Data: []byte("then appended")})
		changed += r.Attr.Size + uint64(len("then appended")) - c.kept
	}
	store, id, read := checkpointAndRestore(t, h)
	t.Logf("the checkpoint read %d bytes; the changed files hold %d, the files written in order %d", read, changed, size+3<<20)
	if read < changed {
		t.Fatalf("the checkpoint read %d bytes, less than the %d of the files not written in order: it took a checksum the apply does not keep", read, changed)
	}
	if read >= changed+1<<20 {
		t.Fatalf("the checkpoint read %d bytes, want only the %d of the files not written in order", read, changed)
	}

	// A restore replaces the tree: the checksums kept of the files it
	// replaced are forgotten. Here the file rewritten in order after the
	// checkpoint has the restored file's size but other bytes.
	_, rc, err := store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	h.do(wire.Op{Kind: wire.KindTruncate, Ino: inOrder, Size: 0})
	h.fill(inOrder, bytes.Repeat([]byte("after"), size/5+1)[:size])
	err = h.f.Restore(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	h.do(wire.Op{Kind: wire.KindWrite, Ino: inOrder, Offset: size, Data: []byte("appended after the restore")})
	_, want, err := h.f.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got := restoredDigest(t, store, checkpointThroughStore(t, h, store, nil)); got != want {
		t.Fatalf("the checkpoint taken after a restore restores digest %s, want %s", got, want)
	}
}

// The pages of a file written in order leave the page cache once written
// back; a file written otherwise keeps them, and so does the coordinator,
// which serves the volume's reads, for every file.
func TestPagesOfAFileWrittenInOrderLeaveThePageCache(t *testing.T) {
	const size = 96 << 20
	h := newHarness(t, Limits{})
	inOrder := h.mk(wire.KindCreate, wire.RootIno, "in-order")
	h.fill(inOrder, pattern(size))
	other := h.mk(wire.KindCreate, wire.RootIno, "other")
	h.do(wire.Op{Kind: wire.KindWrite, Ino: other, Offset: 4096, Data: []byte("out of order")})
	h.fill(other, pattern(size))
	syncFile(t, h.f.files.path(inOrder))
	h.f.SetServesReads(true)
	served := h.mk(wire.KindCreate, wire.RootIno, "served")
	h.fill(served, pattern(size))
	h.f.SetServesReads(false)
	syncFile(t, h.f.files.path(served))
	if p := h.f.sums.prefix(served, size); p.n != size {
		t.Fatalf("the coordinator kept the checksum of %d bytes of a file it wrote in order, want %d", p.n, size)
	}

	got, kept := cachedBytes(t, h.f.files.path(inOrder)), cachedBytes(t, h.f.files.path(other))
	t.Logf("cached: %d MiB of the file written in order, %d MiB of the other, of %d MiB each", got>>20, kept>>20, size>>20)
	if kept < size*3/4 {
		t.Skipf("only %d of %d bytes of a file written out of order are cached: this machine's page cache does not keep written files, so dropping them cannot be seen", kept, size)
	}
	// With RWF_DONTCACHE every whole page written leaves once written back
	// (the file was synced). Without it the pages stay until reclaimed.
	if dontCacheRefused.Load() {
		t.Skipf("the backing filesystem refused RWF_DONTCACHE: written pages stay cached by design")
	}
	bound := uint64(size / 8)
	if got > bound {
		t.Fatalf("%d of %d bytes of a file written in order and synced are still cached, want at most %d: its pages did not leave the cache", got, size, bound)
	}
	if got := cachedBytes(t, h.f.files.path(served)); got < size*3/4 {
		t.Fatalf("the coordinator kept %d of %d bytes of a file it wrote in order cached, want them for its reads", got, size)
	}
}

// In-order writes of every size and alignment (the whole pages written
// around the cache, partial ones through it, small writes through it) land
// whole, on the path that takes RWF_DONTCACHE and on the one that does not.
func TestInOrderWritesOfEverySizeLandWhole(t *testing.T) {
	sizes := []int{300_001, 1 << 20, 4095, 262_144 + 17, 2<<20 + 3, 1, 262_144, 4 << 20, 123_457}
	const size = 24 << 20
	all := pattern(size + 4<<20)
	for _, refused := range []bool{false, true} {
		was := dontCacheRefused.Load()
		dontCacheRefused.Store(refused)
		h := newHarness(t, Limits{})
		ino := h.mk(wire.KindCreate, wire.RootIno, "f")
		n := 0
		for i := 0; n < size; i++ {
			chunk := all[n : n+sizes[i%len(sizes)]]
			if r := h.do(wire.Op{Kind: wire.KindWrite, Ino: ino, Offset: uint64(n), Data: chunk}); r.Errno != 0 {
				t.Fatalf("write %d: errno %d", i, r.Errno)
			}
			n += len(chunk)
		}
		want := all[:n]
		got, err := os.ReadFile(h.f.files.path(ino))
		dontCacheRefused.Store(was)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("RWF_DONTCACHE refused %v: the file holds %d bytes that differ from the %d written in order", refused, len(got), len(want))
		}
		if p := h.f.sums.prefix(ino, uint64(len(want))); p.n != uint64(len(want)) || p.crc != crc32.Checksum(want, castagnoli) {
			t.Fatalf("RWF_DONTCACHE refused %v: the kept checksum (of %d bytes) is not the file's", refused, p.n)
		}
	}
}

func syncFile(t *testing.T, path string) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
}

// cachedBytes is how much of the file at path is in the page cache.
func cachedBytes(t *testing.T, path string) uint64 {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(fh.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	var n uint64
	for _, v := range vec {
		n += uint64(v & 1)
	}
	return n * uint64(page)
}

// A freed file's kept checksum goes with it, so files created, written and
// removed one after another never fill the table.
func TestAFreedFilesKeptChecksumGoesWithIt(t *testing.T) {
	h := newHarness(t, Limits{})
	for i := range 3 {
		ino := h.mk(wire.KindCreate, wire.RootIno, "f")
		h.do(wire.Op{Kind: wire.KindWrite, Ino: ino, Data: []byte("written in order")})
		if p := h.f.sums.prefix(ino, uint64(len("written in order"))); p.n != uint64(len("written in order")) {
			t.Fatalf("file %d: no checksum kept for a file written in order", i)
		}
		if r := h.do(wire.Op{Kind: wire.KindUnlink, Ino: wire.RootIno, Name: "f"}); r.Errno != 0 {
			t.Fatalf("unlink: errno %d", r.Errno)
		}
	}
	if n := len(h.f.sums.m); n != 0 {
		t.Fatalf("%d checksums kept after their files were removed", n)
	}
}

// The checksum of A followed by B, combined from theirs and B's length,
// is the checksum of the bytes A then B, for every split of a buffer.
func TestCRC32CombineIsTheChecksumOfTheConcatenation(t *testing.T) {
	data := pattern(3<<20 + 17)
	for _, split := range []int{0, 1, 7, 4096, 1 << 20, len(data) - 1, len(data)} {
		a, b := data[:split], data[split:]
		got := crc32Combine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), uint64(len(b)))
		if want := crc32.Checksum(data, castagnoli); got != want {
			t.Fatalf("split at %d: combined %08x, want %08x", split, got, want)
		}
	}
}

// Writes that reach a file ahead of the bytes before them, as a writer's
// concurrent calls commit (the mount keeps four in flight), are folded into
// the kept checksum once those bytes arrive, and their pages leave the
// cache too. A checkpoint then reads nothing of such a file, and of one
// still missing a write only the bytes past the gap. A file with more
// writes waiting than maxSeqPending, or whose waiting write is written
// over, is no longer one written in order and is read whole.
func TestWritesAheadOfTheirPredecessorsAreFoldedIntoTheKeptChecksum(t *testing.T) {
	const chunk, chunks = 1 << 20, 24
	h := newHarness(t, Limits{})
	content := pattern(chunks * chunk)
	write := func(ino uint64, i int) {
		t.Helper()
		if r := h.do(wire.Op{Kind: wire.KindWrite, Ino: ino, Offset: uint64(i * chunk), Data: content[i*chunk : (i+1)*chunk]}); r.Errno != 0 {
			t.Fatalf("write chunk %d: errno %d", i, r.Errno)
		}
	}
	// Windows of four, each written last first.
	windows := func(ino uint64, skip int) {
		for w := 0; w < chunks; w += 4 {
			for i := w + 3; i >= w; i-- {
				if i != skip {
					write(ino, i)
				}
			}
		}
	}
	folded := h.mk(wire.KindCreate, wire.RootIno, "folded")
	windows(folded, -1)
	gap := h.mk(wire.KindCreate, wire.RootIno, "gap")
	windows(gap, 9)
	tooMany := h.mk(wire.KindCreate, wire.RootIno, "too-many")
	for i := maxSeqPending + 1; i >= 0; i-- {
		write(tooMany, i)
	}
	overwritten := h.mk(wire.KindCreate, wire.RootIno, "overwritten")
	write(overwritten, 2)
	write(overwritten, 2)
	write(overwritten, 1)
	write(overwritten, 0)

	if p := h.f.sums.prefix(folded, chunks*chunk); p.n != chunks*chunk || p.crc != crc32.Checksum(content, castagnoli) {
		t.Fatalf("the file written in windows keeps the checksum of %d bytes (%08x), want all %d (%08x)", p.n, p.crc, chunks*chunk, crc32.Checksum(content, castagnoli))
	}
	if p := h.f.sums.prefix(gap, chunks*chunk); p.n != 9*chunk || p.crc != crc32.Checksum(content[:9*chunk], castagnoli) {
		t.Fatalf("the file missing chunk 9 keeps the checksum of %d bytes, want the %d before the gap", p.n, 9*chunk)
	}
	for name, ino := range map[string]uint64{"too-many": tooMany, "overwritten": overwritten} {
		if p := h.f.sums.prefix(ino, 3*chunk); p.n != 0 {
			t.Fatalf("%s: a checksum of %d bytes kept", name, p.n)
		}
	}
	syncFile(t, h.f.files.path(folded))
	if got := cachedBytes(t, h.f.files.path(folded)); got > chunks*chunk/8 && !dontCacheRefused.Load() {
		t.Fatalf("%d of %d bytes of the file written in windows are still cached", got, chunks*chunk)
	}

	_, _, read := checkpointAndRestore(t, h)
	mustRead := uint64(chunks-9)*chunk + uint64(maxSeqPending+2)*chunk + 3*chunk
	t.Logf("the checkpoint read %d bytes, the bytes it could not take from the apply are %d", read, mustRead)
	if read < mustRead || read >= mustRead+1<<20 {
		t.Fatalf("the checkpoint read %d bytes, want the %d past the kept checksums", read, mustRead)
	}
}
