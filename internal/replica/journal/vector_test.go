package journal

import (
	"bytes"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// An append written as a vector (entries' data in place) reads back entry
// for entry, after a reopen too: empty data, a 1 MiB payload, extensions,
// across two batches.
func TestVectoredAppendsReadBackAfterReopen(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte{0xA5, 0x5A, 0x01}, 1<<20/3)
	at := time.Unix(0, 1234567)
	batches := [][]*raft.Log{
		{{Index: 1, Term: 1, Type: raft.LogNoop, AppendedAt: at},
			{Index: 2, Term: 1, Type: raft.LogCommand, Data: big, AppendedAt: at},
			{Index: 3, Term: 2, Type: raft.LogCommand, Data: []byte("x"), Extensions: []byte("ext"), AppendedAt: at}},
		{{Index: 4, Term: 2, Type: raft.LogCommand, Data: big[:4096], Extensions: []byte("e"), AppendedAt: at}},
	}
	l, _ := openT(t, dir, 1<<30)
	for _, b := range batches {
		if err := l.StoreLogs(b); err != nil {
			t.Fatal(err)
		}
	}
	check := func(l *Log, when string) {
		t.Helper()
		for _, b := range batches {
			for _, want := range b {
				var got raft.Log
				if err := l.GetLog(want.Index, &got); err != nil {
					t.Fatalf("%s: entry %d: %v", when, want.Index, err)
				}
				if got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) ||
					!bytes.Equal(got.Extensions, want.Extensions) || !got.AppendedAt.Equal(want.AppendedAt) {
					t.Fatalf("%s: entry %d differs: term %d type %d %d data bytes ext %q", when, want.Index,
						got.Term, got.Type, len(got.Data), got.Extensions)
				}
			}
		}
	}
	check(l, "before reopen")
	l.Close()
	l2, torn := openT(t, dir, 1<<30)
	if torn != 0 {
		t.Fatalf("reopen found %d torn bytes in intact appends", torn)
	}
	check(l2, "after reopen")
}
