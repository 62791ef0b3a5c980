package wire

import (
	"bytes"
	"math"
	"reflect"
	"runtime"
	"testing"
)

// receiveCall encodes c as a client sends it and reads it back as the
// coordinator's RPC server does.
func receiveCall(t *testing.T, c *Call) Call {
	t.Helper()
	buf, err := ReadCallFrame(bytes.NewReader(CallFrame(c)), MaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCallFrame(buf)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func filled(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) + seed
	}
	return b
}

// The entry built in a received call's buffer is, byte for byte, the
// entry EncodeEntry makes of the same operations and time, and holds the
// call's data where it was received: whatever the lengths of the header's
// varints, the number of operations and the data's sizes.
func TestEntryInPlaceIsTheEncodedEntryAroundTheReceivedData(t *testing.T) {
	calls := map[string]Call{
		"one 1 MiB write": {ID: 1, Ops: []Op{{Kind: KindWrite, Session: 3, Seq: 9, Ino: 12, Offset: 7 << 20, Data: filled(1<<20, 1), Epoch: 4}}},
		"four 1 MiB writes": {ID: math.MaxUint64, Ops: []Op{
			{Kind: KindWrite, Ino: 12, Offset: 0, Data: filled(1<<20, 2)},
			{Kind: KindWrite, Ino: 12, Offset: 1 << 20, Data: filled(1<<20, 3)},
			{Kind: KindWrite, Ino: 13, Offset: 5, Data: filled(1<<20, 4)},
			{Kind: KindWrite, Ino: 14, Offset: 1 << 40, Data: filled(1<<20-3, 5)}}},
		"a small write": {ID: 300, Ops: []Op{{Kind: KindWrite, Ino: 2, Offset: 4096, Data: filled(4096, 6)}}},
		"writes and names": {ID: 2, Ops: []Op{
			{Kind: KindWrite, Ino: 5, Data: filled(60000, 7)},
			{Kind: KindSetxattr, Ino: 5, Name: "user.k", Data: filled(100, 8)},
			{Kind: KindTruncate, Ino: 5, Size: 99},
			{Kind: KindWrite, Ino: 5, Offset: 1, Data: nil}}},
	}
	for name, sent := range calls {
		for _, tm := range []int64{0, 1, -1, 1 << 20, math.MaxInt64, math.MinInt64, 1_780_000_000_000_000_000} {
			got := receiveCall(t, &sent)
			want := EncodeEntry(&Entry{Time: tm, Ops: got.Ops})
			entry, ok := EntryInPlace(&got, tm)
			if !ok {
				t.Fatalf("%s at time %d: not built in place", name, tm)
			}
			if !bytes.Equal(entry, want) {
				t.Fatalf("%s at time %d: the entry built in place (%d bytes) differs from EncodeEntry's (%d bytes)", name, tm, len(entry), len(want))
			}
			for i := range got.Ops {
				if d := got.Ops[i].Data; len(d) > 0 && !aliases(entry, d) {
					t.Fatalf("%s: operation %d's data was copied, not left in place", name, i)
				}
			}
			back, err := DecodeEntry(entry)
			if err != nil || back.Time != tm || !reflect.DeepEqual(back.Ops, got.Ops) {
				t.Fatalf("%s at time %d: the entry decodes to other operations (err %v)", name, tm, err)
			}
			if _, again := EntryInPlace(&got, tm); again {
				t.Fatalf("%s: a second entry was built in a buffer the first one owns", name)
			}
		}
	}
}

// A call whose operations no longer encode as received (the coordinator
// stamped them), a call not read with ReadCallFrame, and a buffer much
// larger than its entry are refused, and the buffer is left as it was.
func TestEntryInPlaceRefusesWhatItCannotBuildExactly(t *testing.T) {
	write := Call{ID: 5, Ops: []Op{{Kind: KindWrite, Ino: 9, Data: filled(1<<20, 9)}, {Kind: KindCreate, Ino: 1, Name: "f", Time: 77}}}
	stamps := map[string]func(o []Op){
		"a time cleared":            func(o []Op) { o[1].Time = 0 },
		"an inode number given":     func(o []Op) { o[1].NewIno = 1 << 30 },
		"a name changed":            func(o []Op) { o[1].Name = "g" },
		"data moved to a new slice": func(o []Op) { o[0].Data = bytes.Clone(o[0].Data) },
	}
	for name, stamp := range stamps {
		got := receiveCall(t, &write)
		stamp(got.Ops)
		before := bytes.Clone(got.frame)
		if _, ok := EntryInPlace(&got, 42); ok {
			t.Fatalf("%s: built in place", name)
		}
		if !bytes.Equal(got.frame, before) {
			t.Fatalf("%s: the refused call's buffer was changed", name)
		}
	}
	plain, err := DecodeCall(CallFrame(&write)[frameHeader:])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := EntryInPlace(&plain, 42); ok {
		t.Fatal("a call decoded without ReadCallFrame's room was built in place")
	}
	// 1 MiB and a quarter falls in the 2 MiB pool class: the log would hold
	// 0.75 MiB of nothing for as long as it holds the entry.
	loose := receiveCall(t, &Call{ID: 6, Ops: []Op{{Kind: KindWrite, Ino: 9, Data: filled(5<<18, 1)}}})
	n, c := len(loose.frame), cap(loose.frame)
	if c < 2<<20 {
		t.Fatalf("test premise: a %d byte frame in a buffer of %d", n, c)
	}
	if _, ok := EntryInPlace(&loose, 42); ok {
		t.Fatalf("an entry of about %d bytes was built in a buffer of %d", n, c)
	}
}

// Building a 1 MiB write's entry allocates no buffer of the data's size:
// the point of building it in place.
func TestEntryInPlaceAllocatesNoDataSizedBuffer(t *testing.T) {
	const n = 16
	calls := make([]Call, n)
	for i := range calls {
		calls[i] = receiveCall(t, &Call{ID: uint64(i), Ops: []Op{{Kind: KindWrite, Ino: 9, Data: filled(1<<20, byte(i))}}})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range calls {
		if _, ok := EntryInPlace(&calls[i], int64(i)); !ok {
			t.Fatalf("call %d not built in place", i)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 64<<10 {
		t.Fatalf("building a 1 MiB write's entry allocated %d bytes on average, want no data-sized buffer", per)
	}
}
