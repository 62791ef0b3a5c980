package wire

import (
	"bytes"
	"reflect"
	"runtime"
	"testing"
)

func readReply(frame, data []byte) *Reply {
	return &Reply{ID: 77, Status: StatusOK, Results: []Result{{
		Attr: Attr{Ino: 9, Size: 5 << 20, Mode: 0o100644, Nlink: 1}, N: uint64(len(data)), Data: data, Frame: frame}}}
}

// A read reply built around data already in its ReadBuffer is the same
// frame, byte for byte, as the copying encoder's, and it is built inside
// that buffer: the data is not copied.
func TestReadReplyIsBuiltAroundTheDataInPlace(t *testing.T) {
	frame, data := ReadBuffer(1 << 20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	rep := readReply(frame, data)
	got := ReplyFrame(FrameReply, rep)

	copied := *rep
	copied.Results = []Result{rep.Results[0]}
	copied.Results[0].Frame = nil
	want := ReplyFrame(FrameReply, &copied)
	if !bytes.Equal(got, want) {
		t.Fatalf("in-place reply frame (%d bytes) differs from the copying encoder's (%d bytes)", len(got), len(want))
	}
	if !aliases(got, data) {
		t.Fatalf("the reply frame does not contain the read buffer's data in place: it was copied")
	}
	_, back, err := DecodeReply(got[frameHeader:])
	if err != nil {
		t.Fatal(err)
	}
	back.Results[0].Frame = rep.Results[0].Frame
	if !reflect.DeepEqual(back, *rep) {
		t.Fatalf("the in-place reply frame decodes to a different reply")
	}
}

// aliases reports whether inner lies inside outer's memory.
func aliases(outer, inner []byte) bool {
	for i := 0; i+len(inner) <= len(outer); i++ {
		if &outer[i] == &inner[0] {
			return true
		}
	}
	return false
}

// Replies that do not fit the headroom, and replies without a ReadBuffer,
// use the copying encoder and still read back.
func TestReplyFrameFallsBackWhenTheHeaderDoesNotFit(t *testing.T) {
	frame, data := ReadBuffer(4096)
	copy(data, "payload")
	rep := readReply(frame, data)
	rep.Message = string(bytes.Repeat([]byte("m"), ReplyHeadroom))
	got := ReplyFrame(FrameReply, rep)
	if aliases(got, data) {
		t.Fatalf("a header longer than the headroom must not be written in front of the data")
	}
	_, back, err := DecodeReply(got[frameHeader:])
	if err != nil || !bytes.Equal(back.Results[0].Data, data) || back.Message != rep.Message {
		t.Fatalf("fallback reply reads back wrong (%v)", err)
	}
}

// The host's part of a 1 MiB read reply (buffer, frame, release) allocates
// next to nothing per read once the pool is warm; before the change it was
// two fresh megabytes (the read buffer and the frame's copy of it).
func TestPooledReadReplyAllocatesNoDataSizedBuffers(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops Puts at random under the race detector; run without -race")
	}
	const size, rounds = 1 << 20, 50
	one := func() {
		frame, data := ReadBuffer(size)
		data[0] = 1
		rep := readReply(frame, data)
		if f := ReplyFrame(FrameReply, rep); len(f) < size {
			t.Fatalf("short frame")
		}
		rep.Release()
	}
	one()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range rounds {
		one()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / rounds; per > size/8 {
		t.Fatalf("a 1 MiB read reply allocated %d bytes per read, want under %d (pooled, in place)", per, size/8)
	}
}

func TestBufferPoolClassesAreBounded(t *testing.T) {
	for _, n := range []int{1, 4 << 10, 64 << 10, 64<<10 + 3000, 1 << 20, 1<<20 + ReplyHeadroom + replyTailroom, 3 << 20, 4<<20 + 4096} {
		b := GetBuf(n)
		if len(b) != n {
			t.Fatalf("GetBuf(%d) has length %d", n, len(b))
		}
		if c := poolClass(n); c >= 0 && cap(b) != classSize(c) {
			t.Fatalf("GetBuf(%d) has capacity %d, want its class's %d", n, cap(b), classSize(c))
		}
		PutBuf(b)
	}
	if poolClass(4<<20+poolSlack+1) != -1 || poolClass(MaxFrame) != -1 {
		t.Fatalf("buffers beyond 4 MiB of data must not be pooled")
	}
	if poolClass(16<<10) != -1 {
		t.Fatalf("small buffers must not be pooled")
	}
	// A buffer of a capacity that is no class is dropped, not pooled, so a
	// later GetBuf never returns a buffer shorter than its class.
	PutBuf(make([]byte, 1<<20))
	if b := GetBuf(1 << 20); cap(b) != classSize(poolClass(1<<20)) {
		t.Fatalf("GetBuf returned a foreign buffer of capacity %d", cap(b))
	}
}

// A client's write call is encoded into a pooled frame: the same bytes as
// CallFrame, and once the pool is warm no data-sized allocation per call
// (before, a new 4 MiB frame per call of 4 MiB of writes). A reused buffer
// holding an earlier, larger call's bytes encodes the smaller call exactly.
func TestPooledCallFrameEqualsTheCopyAndAllocatesNoDataSizedBuffers(t *testing.T) {
	big := &Call{ID: 7, Ops: []Op{{Kind: KindWrite, Session: 1, Seq: 2, Ino: 3, Offset: 1 << 40,
		Data: bytes.Repeat([]byte("d"), 4<<20-64<<10)}}}
	small := &Call{ID: 8, Ops: []Op{{Kind: KindWrite, Session: 1, Seq: 3, Ino: 3, Data: bytes.Repeat([]byte("s"), 3<<20)}}}
	for _, c := range []*Call{big, small, big} {
		f := PooledCallFrame(c)
		if !bytes.Equal(f, CallFrame(c)) {
			t.Fatalf("pooled call frame of %d ops differs from CallFrame", len(c.Ops))
		}
		PutBuf(f)
	}
	if raceEnabled {
		return // sync.Pool drops Puts at random under the race detector
	}
	const rounds = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range rounds {
		PutBuf(PooledCallFrame(big))
	}
	runtime.ReadMemStats(&after)
	// sync.Pool is per processor: a goroutine moved to another one between
	// Put and Get misses now and then, so the bound is a quarter of a frame
	// per call on average (CallFrame: a whole frame, 4.2 MB, every call).
	if per := (after.TotalAlloc - before.TotalAlloc) / rounds; per > 1<<20 {
		t.Fatalf("a 4 MiB write call allocated %d bytes per frame, want under %d (pooled)", per, 1<<20)
	}
}
