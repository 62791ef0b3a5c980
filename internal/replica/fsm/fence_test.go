package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// fenceLog is a journal in which a single-writer session of epoch 1 writes,
// a newer session opens epoch 2, and then the epoch-1 session's next
// mutation, a retry of its first write, and the epoch-2 session's write are
// ordered after it.
func fenceLog() [][]wire.Op {
	const old, newer = 7, 8
	return [][]wire.Op{
		{{Kind: wire.KindRegister, Session: old}},
		{{Kind: wire.KindFence, Session: old, Seq: 1}},
		{{Kind: wire.KindCreate, Session: old, Seq: 2, Epoch: 1, Ino: wire.RootIno, Name: "f", Mode: 0o644, NewIno: 10}},
		{{Kind: wire.KindWrite, Session: old, Seq: 3, Epoch: 1, Ino: 10, Data: []byte("epoch one")}},
		{{Kind: wire.KindRegister, Session: newer}},
		{{Kind: wire.KindFence, Session: newer, Seq: 1}},
		{{Kind: wire.KindWrite, Session: old, Seq: 4, Epoch: 1, Ino: 10, Data: []byte("STALE WRITER")}},
		{{Kind: wire.KindWrite, Session: old, Seq: 3, Epoch: 1, Ino: 10, Data: []byte("epoch one")}},
		{{Kind: wire.KindWrite, Session: newer, Seq: 2, Epoch: 2, Ino: 10, Offset: 9, Data: []byte(", two")}},
		{{Kind: wire.KindWrite, Session: 99, Seq: 1, Ino: 10, Data: []byte("x")}}, // unknown session: expired, not fenced
	}
}

func applyAll(t *testing.T, f *FSM, log [][]wire.Op) [][]wire.Result {
	t.Helper()
	var out [][]wire.Result
	for i, ops := range log {
		r := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand,
			Data: wire.EncodeEntry(&wire.Entry{Time: int64(i+1) * 1000, Ops: ops})})
		res, ok := r.([]wire.Result)
		if !ok {
			t.Fatalf("entry %d: apply returned %v", i+1, r)
		}
		out = append(out, res)
	}
	return out
}

func TestMutationOfASupersededEpochIsRefusedDeterministicallyOnReplay(t *testing.T) {
	log := fenceLog()
	first, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Close)
	got := applyAll(t, first, log)
	if e := got[1][0].N; e != 1 {
		t.Fatalf("first fence opened epoch %d, want 1", e)
	}
	if e := got[5][0].N; e != 2 {
		t.Fatalf("second fence opened epoch %d, want 2", e)
	}
	if r := got[6][0]; r.Errno != wire.ErrnoFenced {
		t.Fatalf("a mutation of epoch 1 ordered after epoch 2 opened was not refused as fenced: errno %#x", r.Errno)
	}
	if r := got[7][0]; r.Errno != 0 || r.Attr.Size != 9 {
		t.Fatalf("a retry of an epoch-1 write applied before the fence must return its first result, got errno %#x size %d",
			r.Errno, r.Attr.Size)
	}
	if r := got[8][0]; r.Errno != 0 {
		t.Fatalf("the newest epoch's write was refused: errno %#x", r.Errno)
	}
	if r := got[9][0]; r.Errno != wire.ErrnoSessionExpired {
		t.Fatalf("an unknown session's write answered errno %#x, want session expired", r.Errno)
	}
	if data := first.Query(&wire.Op{Kind: wire.KindRead, Ino: 10, Size: 100}).Data; string(data) != "epoch one, two" {
		t.Fatalf("file holds %q: the fenced writer's bytes reached it", data)
	}
	if !first.Fenced(1) || first.Fenced(2) || first.Fenced(0) {
		t.Fatalf("read-path check: Fenced(1)=%v Fenced(2)=%v Fenced(0)=%v, want true false false",
			first.Fenced(1), first.Fenced(2), first.Fenced(0))
	}

	// Replay: another replica applying the same journal decides the same.
	second, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Close)
	replayed := applyAll(t, second, log)
	for i := range got {
		if got[i][0].Errno != replayed[i][0].Errno || got[i][0].N != replayed[i][0].N {
			t.Fatalf("entry %d: replay answered errno %#x n %d, first apply errno %#x n %d",
				i+1, replayed[i][0].Errno, replayed[i][0].N, got[i][0].Errno, got[i][0].N)
		}
	}
	_, d1, _ := first.Digest()
	_, d2, _ := second.Digest()
	if d1 != d2 {
		t.Fatalf("replicas applying the same journal diverged: %s vs %s", d1, d2)
	}
}

func TestFencingEpochSurvivesACheckpoint(t *testing.T) {
	src, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	log := fenceLog()
	applyAll(t, src, log[:6]) // up to and including the second fence
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	dst, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dst.Close)
	dst.opt.Chunks = chunksOf(t, src)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if e := dst.FenceEpoch(); e != 2 {
		t.Fatalf("restored fencing epoch %d, want 2", e)
	}
	r := dst.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: wire.EncodeEntry(&wire.Entry{Time: 7000, Ops: log[6]})})
	if res := r.([]wire.Result); res[0].Errno != wire.ErrnoFenced {
		t.Fatalf("after a checkpoint restore an epoch-1 write answered errno %#x, want fenced", res[0].Errno)
	}
	src.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: wire.EncodeEntry(&wire.Entry{Time: 7000, Ops: log[6]})})
	_, want, _ := src.Digest()
	if _, got, _ := dst.Digest(); got != want {
		t.Fatalf("restored replica diverged from its source after the fenced write: %s vs %s", got, want)
	}
}
