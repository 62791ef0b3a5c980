package journal

import (
	"testing"

	"github.com/hashicorp/raft"
)

func TestBytesAndNewestWithinCountTheFramesOnDisk(t *testing.T) {
	l, _, err := OpenLog(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := uint64(1); i <= 10; i++ {
		if err := l.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: make([]byte, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	total := l.Bytes()
	if total < 10*1000 {
		t.Fatalf("ten 1000-byte entries take %d bytes", total)
	}
	frame := total / 10
	if got := l.NewestWithin(3*frame + frame/2); got != 3 {
		t.Fatalf("%d bytes hold the newest %d entries, want 3", 3*frame+frame/2, got)
	}
	if got := l.NewestWithin(total); got != 10 {
		t.Fatalf("the whole journal's size holds %d entries, want 10", got)
	}
	if err := l.DeleteRange(1, 6); err != nil {
		t.Fatal(err)
	}
	if got := l.NewestWithin(total); got != 4 {
		t.Fatalf("after compacting to index 7 the budget counts %d entries, want the 4 live ones", got)
	}
}
