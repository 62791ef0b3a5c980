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

func TestBytesBetweenCountsTheFramesOfARangeAcrossSegments(t *testing.T) {
	// 64 KiB segments and entries of 10 to 40 kB: ranges span segments.
	l, _, err := OpenLog(t.TempDir(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data := func(i uint64) int64 { return int64(10_000 * (1 + i%4)) }
	for i := uint64(1); i <= 12; i++ {
		if err := l.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: make([]byte, data(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.segs) < 3 {
		t.Fatalf("the entries fill %d segments, want at least 3", len(l.segs))
	}
	// A frame is its entry's data plus headers and fixed fields (and a
	// segment's batch markers): far less than the smallest entry, so a
	// range one entry off is caught.
	const overhead = 128
	check := func(after, through, live uint64) {
		t.Helper()
		var want, count int64
		for i := max(after, live-1) + 1; i <= min(through, 12); i++ {
			want += data(i)
			count++
		}
		if got := l.BytesBetween(after, through); got < want || got > want+count*overhead {
			t.Errorf("BytesBetween(%d, %d) = %d, want %d plus at most %d bytes of framing", after, through, got, want, count*overhead)
		}
	}
	for _, c := range [][2]uint64{{0, 12}, {3, 9}, {5, 5}, {4, 5}, {11, 12}, {7, 40}, {12, 12}, {9, 4}} {
		check(c[0], c[1], 1)
	}
	if err := l.DeleteRange(1, 6); err != nil {
		t.Fatal(err)
	}
	check(0, 12, 7)
	check(6, 8, 7)
}
