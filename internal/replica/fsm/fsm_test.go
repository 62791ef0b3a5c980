package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

const testSession = 42

type harness struct {
	t     testing.TB
	f     *FSM
	index uint64
	seq   uint64
	ino   uint64
}

func newHarness(t *testing.T, lim Limits) *harness {
	t.Helper()
	f, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	h := &harness{t: t, f: f, ino: 100}
	if lim != (Limits{}) {
		h.setLimits(lim)
	}
	h.entry(wire.Op{Kind: wire.KindRegister, Session: testSession})
	return h
}

// entry applies one entry and returns its results.
func (h *harness) entry(ops ...wire.Op) []wire.Result {
	h.t.Helper()
	h.index++
	for i := range ops {
		switch ops[i].Kind {
		case wire.KindCreate, wire.KindMkdir, wire.KindMknod, wire.KindSymlink:
			if ops[i].NewIno == 0 {
				h.ino++
				ops[i].NewIno = h.ino
			}
		}
		if ops[i].Session == 0 && ops[i].Kind != wire.KindRegister {
			h.seq++
			ops[i].Session, ops[i].Seq = testSession, h.seq
		}
	}
	out := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand,
		Data: wire.EncodeEntry(&wire.Entry{Time: int64(h.index) * 1000, Ops: ops})})
	res, ok := out.([]wire.Result)
	if !ok {
		h.t.Fatalf("apply returned %v", out)
	}
	return res
}

func (h *harness) do(op wire.Op) wire.Result { return h.entry(op)[0] }

func (h *harness) mk(kind wire.Kind, parent uint64, name string) uint64 {
	h.t.Helper()
	r := h.do(wire.Op{Kind: kind, Ino: parent, Name: name, Mode: 0o755, Data: []byte("target")})
	if r.Errno != 0 {
		h.t.Fatalf("%s %s: errno %d", kind, name, r.Errno)
	}
	return r.Attr.Ino
}

func errnoOf(r wire.Result) syscall.Errno { return syscall.Errno(r.Errno) }

func TestNamespaceOperationsFollowLinuxSemantics(t *testing.T) {
	h := newHarness(t, Limits{})
	dir := h.mk(wire.KindMkdir, wire.RootIno, "d")
	sub := h.mk(wire.KindMkdir, dir, "sub")
	file := h.mk(wire.KindCreate, dir, "f")
	h.mk(wire.KindCreate, dir, "g")
	h.mk(wire.KindSymlink, wire.RootIno, "l")
	cases := []struct {
		name string
		op   wire.Op
		want syscall.Errno
	}{
		{"create existing name", wire.Op{Kind: wire.KindCreate, Ino: dir, Name: "f"}, syscall.EEXIST},
		{"create in a file", wire.Op{Kind: wire.KindCreate, Ino: file, Name: "x"}, syscall.ENOTDIR},
		{"create with slash", wire.Op{Kind: wire.KindCreate, Ino: dir, Name: "a/b"}, syscall.EINVAL},
		{"unlink a directory", wire.Op{Kind: wire.KindUnlink, Ino: dir, Name: "sub"}, syscall.EISDIR},
		{"rmdir a file", wire.Op{Kind: wire.KindRmdir, Ino: dir, Name: "f"}, syscall.ENOTDIR},
		{"rmdir non-empty", wire.Op{Kind: wire.KindRmdir, Ino: wire.RootIno, Name: "d"}, syscall.ENOTEMPTY},
		{"link a directory", wire.Op{Kind: wire.KindLink, Ino: sub, Ino2: wire.RootIno, Name: "x"}, syscall.EPERM},
		{"rename missing", wire.Op{Kind: wire.KindRename, Ino: dir, Name: "none", Ino2: dir, Name2: "x"}, syscall.ENOENT},
		{"noreplace onto existing", wire.Op{Kind: wire.KindRename, Ino: dir, Name: "f", Ino2: dir, Name2: "g", Flags: wire.RenameNoReplace}, syscall.EEXIST},
		{"exchange with missing", wire.Op{Kind: wire.KindRename, Ino: dir, Name: "f", Ino2: dir, Name2: "none", Flags: wire.RenameExchange}, syscall.ENOENT},
		{"both rename flags", wire.Op{Kind: wire.KindRename, Ino: dir, Name: "f", Ino2: dir, Name2: "g", Flags: wire.RenameExchange | wire.RenameNoReplace}, syscall.EINVAL},
		{"directory into itself", wire.Op{Kind: wire.KindRename, Ino: wire.RootIno, Name: "d", Ino2: sub, Name2: "d"}, syscall.EINVAL},
		{"file over directory", wire.Op{Kind: wire.KindRename, Ino: dir, Name: "f", Ino2: dir, Name2: "sub"}, syscall.EISDIR},
		{"directory over file", wire.Op{Kind: wire.KindRename, Ino: dir, Name: "sub", Ino2: dir, Name2: "f"}, syscall.ENOTDIR},
		{"write to a directory", wire.Op{Kind: wire.KindWrite, Ino: dir, Data: []byte("x")}, syscall.EISDIR},
		{"replace xattr that is absent", wire.Op{Kind: wire.KindSetxattr, Ino: file, Name: "user.a", Flags: wire.XattrReplace}, syscall.ENODATA},
		{"remove absent xattr", wire.Op{Kind: wire.KindRemovexattr, Ino: file, Name: "user.a"}, syscall.ENODATA},
		{"unsupported fallocate mode", wire.Op{Kind: wire.KindFallocate, Ino: file, Size: 10, Flags: 0x40}, syscall.EOPNOTSUPP},
		{"fallocate length overflowing the offset", wire.Op{Kind: wire.KindFallocate, Ino: file, Offset: 1 << 40, Size: 1<<64 - 1}, syscall.EINVAL},
		{"write beyond the largest file", wire.Op{Kind: wire.KindWrite, Ino: file, Offset: 1 << 62, Data: []byte("x")}, syscall.EFBIG},
		{"truncate beyond the largest file", wire.Op{Kind: wire.KindTruncate, Ino: file, Size: 1 << 62}, syscall.EFBIG},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := errnoOf(h.do(tc.op)); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if err := h.f.Failed(); err != nil {
				t.Fatalf("a rejected operation stopped the state machine: %v", err)
			}
		})
	}
}

func TestRenameExchangeAndReplaceKeepLinkCounts(t *testing.T) {
	h := newHarness(t, Limits{})
	a := h.mk(wire.KindMkdir, wire.RootIno, "a")
	b := h.mk(wire.KindMkdir, wire.RootIno, "b")
	f := h.mk(wire.KindCreate, a, "f")
	h.do(wire.Op{Kind: wire.KindWrite, Ino: f, Data: []byte("data")})
	g := h.mk(wire.KindCreate, b, "g")
	if r := h.do(wire.Op{Kind: wire.KindRename, Ino: a, Name: "f", Ino2: b, Name2: "g", Flags: wire.RenameExchange}); r.Errno != 0 {
		t.Fatalf("exchange: %v", errnoOf(r))
	}
	if got := h.f.Query(&wire.Op{Kind: wire.KindLookup, Ino: b, Name: "g"}); got.Attr.Ino != f {
		t.Fatalf("after exchange b/g is inode %d, want %d", got.Attr.Ino, f)
	}
	if r := h.do(wire.Op{Kind: wire.KindRename, Ino: b, Name: "g", Ino2: a, Name2: "f"}); r.Errno != 0 {
		t.Fatalf("replace: %v", errnoOf(r))
	}
	if got := h.f.Query(&wire.Op{Kind: wire.KindGetattr, Ino: g}); errnoOf(got) != syscall.ENOENT {
		t.Fatalf("the replaced file must be freed, getattr gave %v", errnoOf(got))
	}
	if st := h.f.Query(&wire.Op{Kind: wire.KindStatfs}); st.StatFs.Used != 4 {
		t.Fatalf("used bytes %d, want 4", st.StatFs.Used)
	}
	sub := h.mk(wire.KindMkdir, a, "sub")
	h.do(wire.Op{Kind: wire.KindRename, Ino: a, Name: "sub", Ino2: b, Name2: "sub"})
	for _, c := range []struct {
		ino   uint64
		nlink uint32
	}{{a, 2}, {b, 3}, {sub, 2}} {
		if got := h.f.Query(&wire.Op{Kind: wire.KindGetattr, Ino: c.ino}).Attr.Nlink; got != c.nlink {
			t.Fatalf("inode %d has nlink %d, want %d", c.ino, got, c.nlink)
		}
	}
}

func TestWritesBeyondCapacityFailWithENOSPC(t *testing.T) {
	h := newHarness(t, Limits{Capacity: 10})
	f := h.mk(wire.KindCreate, wire.RootIno, "f")
	if r := h.do(wire.Op{Kind: wire.KindWrite, Ino: f, Data: []byte("0123456789")}); r.Errno != 0 {
		t.Fatalf("write within capacity: %v", errnoOf(r))
	}
	for _, op := range []wire.Op{
		{Kind: wire.KindWrite, Ino: f, Offset: 10, Data: []byte("x")},
		{Kind: wire.KindTruncate, Ino: f, Size: 11},
		{Kind: wire.KindFallocate, Ino: f, Offset: 0, Size: 11},
	} {
		if got := errnoOf(h.do(op)); got != syscall.ENOSPC {
			t.Fatalf("%s past capacity: got %v, want ENOSPC", op.Kind, got)
		}
	}
	if r := h.do(wire.Op{Kind: wire.KindTruncate, Ino: f, Size: 2}); r.Errno != 0 {
		t.Fatalf("shrinking must succeed: %v", errnoOf(r))
	}
}

func TestRetryReturnsTheFirstResultAndEvictionExpiresTheSession(t *testing.T) {
	h := newHarness(t, Limits{MaxSessions: 2})
	f := h.mk(wire.KindCreate, wire.RootIno, "f")
	app := wire.Op{Kind: wire.KindWrite, Session: testSession, Seq: 100, Ino: f, Flags: wire.WriteAppend, Data: []byte("a")}
	first := h.do(app)
	again := h.do(app)
	if !reflect.DeepEqual(again, first) || h.f.Query(&wire.Op{Kind: wire.KindGetattr, Ino: f}).Attr.Size != 1 {
		t.Fatalf("a retried append applied twice or returned a different result")
	}
	// Two newer sessions evict the least recently used one.
	h.do(wire.Op{Kind: wire.KindRegister, Session: 7})
	h.do(wire.Op{Kind: wire.KindRegister, Session: 8})
	app.Seq = 101
	if r := h.do(app); r.Errno != wire.ErrnoSessionExpired {
		t.Fatalf("an evicted session must get the session-expired answer, got errno %d", r.Errno)
	}
	app.Seq = 100
	if r := h.do(app); r.Errno != wire.ErrnoSessionExpired {
		t.Fatalf("a retry from an evicted session must never apply again, got errno %d", r.Errno)
	}
	if size := h.f.Query(&wire.Op{Kind: wire.KindGetattr, Ino: f}).Attr.Size; size != 1 {
		t.Fatalf("file size %d, want 1", size)
	}
}

func TestCheckpointRoundTripsAndACorruptOneIsRefused(t *testing.T) {
	h := newHarness(t, Limits{})
	d := h.mk(wire.KindMkdir, wire.RootIno, "d")
	f := h.mk(wire.KindCreate, d, "f")
	h.do(wire.Op{Kind: wire.KindWrite, Ino: f, Offset: 3, Data: []byte("payload")})
	h.do(wire.Op{Kind: wire.KindSetxattr, Ino: f, Name: "user.k", Data: []byte("v")})
	_, want, err := h.f.Digest()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	other := newHarness(t, Limits{})
	other.f.opt.Chunks = chunksOf(t, h.f)
	other.mk(wire.KindCreate, wire.RootIno, "to-be-replaced")
	corrupt := append([]byte{}, sink.Bytes()...)
	corrupt[len(corrupt)/2] ^= 0xFF
	_, before, _ := other.f.Digest()
	if err := other.f.Restore(io.NopCloser(bytes.NewReader(corrupt))); !errors.Is(err, ErrCheckpointCorrupt) {
		t.Fatalf("a corrupt checkpoint must be refused, got %v", err)
	}
	if _, after, _ := other.f.Digest(); after != before {
		t.Fatalf("a refused checkpoint changed the installed state")
	}
	if err := other.f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := other.f.Digest(); got != want {
		t.Fatalf("restored state digest %s, want %s", got, want)
	}
	if r := other.f.Query(&wire.Op{Kind: wire.KindRead, Ino: f, Size: 100}); string(r.Data) != "\x00\x00\x00payload" {
		t.Fatalf("restored file reads %q", r.Data)
	}
}

type memSink struct{ bytes.Buffer }

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { return nil }
func (m *memSink) Close() error  { return nil }

func TestReplayFromScratchReachesTheSameState(t *testing.T) {
	ops := []wire.Op{
		{Kind: wire.KindMkdir, Ino: wire.RootIno, Name: "d", NewIno: 10},
		{Kind: wire.KindCreate, Ino: 10, Name: "f", NewIno: 11},
		{Kind: wire.KindWrite, Ino: 11, Data: []byte("abc")},
		{Kind: wire.KindLink, Ino: 11, Ino2: wire.RootIno, Name: "hard"},
		{Kind: wire.KindRename, Ino: 10, Name: "f", Ino2: wire.RootIno, Name2: "g"},
		{Kind: wire.KindTruncate, Ino: 11, Size: 1},
	}
	digest := func() string {
		h := newHarness(t, Limits{})
		for _, op := range ops {
			h.do(op)
		}
		_, d, err := h.f.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if a, b := digest(), digest(); a != b {
		t.Fatalf("applying the same entries twice from scratch diverged: %s vs %s", a, b)
	}
}

func TestOrphansStayReadableUntilReleaseOrSessionEviction(t *testing.T) {
	h := newHarness(t, Limits{MaxSessions: 2})
	f := h.mk(wire.KindCreate, wire.RootIno, "open")
	h.do(wire.Op{Kind: wire.KindWrite, Ino: f, Data: []byte("still here")})
	if r := h.do(wire.Op{Kind: wire.KindUnlink, Ino: wire.RootIno, Name: "open", Flags: wire.KeepOrphan}); r.Errno != 0 {
		t.Fatalf("unlink: %v", errnoOf(r))
	}
	st := h.f.Query(&wire.Op{Kind: wire.KindGetattr, Ino: f})
	if st.Errno != 0 || st.Attr.Nlink != 0 {
		t.Fatalf("an open unlinked file must stat with nlink 0, got errno %d nlink %d", st.Errno, st.Attr.Nlink)
	}
	if r := h.f.Query(&wire.Op{Kind: wire.KindRead, Ino: f, Size: 64}); string(r.Data) != "still here" {
		t.Fatalf("an open unlinked file must stay readable, got %q", r.Data)
	}
	if r := h.f.Query(&wire.Op{Kind: wire.KindLookup, Ino: wire.RootIno, Name: "open"}); errnoOf(r) != syscall.ENOENT {
		t.Fatalf("the name must be gone")
	}
	h.do(wire.Op{Kind: wire.KindRelease, Ino: f})
	if r := h.f.Query(&wire.Op{Kind: wire.KindGetattr, Ino: f}); errnoOf(r) != syscall.ENOENT {
		t.Fatalf("a released orphan must be freed, getattr gave %v", errnoOf(r))
	}

	// Rename over an open target keeps the target; evicting the session
	// that kept it frees it.
	a := h.mk(wire.KindCreate, wire.RootIno, "a")
	b := h.mk(wire.KindCreate, wire.RootIno, "b")
	h.do(wire.Op{Kind: wire.KindRename, Ino: wire.RootIno, Name: "a", Ino2: wire.RootIno, Name2: "b", Flags: wire.KeepOrphan})
	if r := h.f.Query(&wire.Op{Kind: wire.KindGetattr, Ino: b}); r.Errno != 0 || r.Attr.Nlink != 0 {
		t.Fatalf("the replaced open target must remain as an orphan")
	}
	h.do(wire.Op{Kind: wire.KindRegister, Session: 7})
	h.do(wire.Op{Kind: wire.KindRegister, Session: 8})
	if r := h.f.Query(&wire.Op{Kind: wire.KindGetattr, Ino: b}); errnoOf(r) != syscall.ENOENT {
		t.Fatalf("orphans of an evicted session must be freed")
	}
	if r := h.f.Query(&wire.Op{Kind: wire.KindLookup, Ino: wire.RootIno, Name: "b"}); r.Attr.Ino != a {
		t.Fatalf("b must now name a's inode")
	}
}

func TestFilesNeverWrittenHaveNoBackingFileAndStayEmptyThroughACheckpoint(t *testing.T) {
	h := newHarness(t, Limits{})
	empty := h.mk(wire.KindCreate, wire.RootIno, "empty")
	grown := h.mk(wire.KindCreate, wire.RootIno, "grown")
	if n := h.chunkFiles(empty); n != 0 {
		t.Fatalf("creating a file made %d chunks in the store", n)
	}
	if r := h.do(wire.Op{Kind: wire.KindSetattr, Ino: grown, Valid: wire.SetSize, Size: 5}); r.Errno != 0 {
		t.Fatalf("truncate up: errno %d", r.Errno)
	}
	if r := h.f.Query(&wire.Op{Kind: wire.KindRead, Ino: grown, Size: 100}); string(r.Data) != "\x00\x00\x00\x00\x00" {
		t.Fatalf("a file truncated up reads %q, want five zero bytes", r.Data)
	}
	if r := h.f.Query(&wire.Op{Kind: wire.KindRead, Ino: empty, Size: 100}); r.Errno != 0 || len(r.Data) != 0 {
		t.Fatalf("a never-written file reads %q errno %d, want nothing", r.Data, r.Errno)
	}
	_, want, err := h.f.Digest()
	if err != nil {
		t.Fatalf("digest with a never-written file: %v", err)
	}
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatalf("checkpoint with a never-written file: %v", err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	other := newHarness(t, Limits{})
	if err := other.f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := other.f.Digest(); got != want {
		t.Fatalf("restored digest %s, want %s", got, want)
	}
	other.seq = h.seq // the restored session's sequence numbers are h's
	if r := other.do(wire.Op{Kind: wire.KindWrite, Ino: empty, Data: []byte("now")}); r.Errno != 0 {
		t.Fatalf("first write after restore: errno %d", r.Errno)
	}
	if r := other.f.Query(&wire.Op{Kind: wire.KindRead, Ino: empty, Size: 100}); string(r.Data) != "now" {
		t.Fatalf("the first write to a never-written file reads back %q", r.Data)
	}
}
