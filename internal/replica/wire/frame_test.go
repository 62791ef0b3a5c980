package wire

import (
	"bytes"
	"reflect"
	"testing"
)

// countingWriter records each Write: on a TLS connection each one is at
// least one record.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// A call or reply frame leaves in one write, its length prefix included,
// and reads back as the value encoded. WriteFrame of a large body takes two
// writes (prefix, then body): the 4-byte TLS record the prefixed frames
// remove from the data path.
func TestPrefixedFramesLeaveInOneWriteAndReadBack(t *testing.T) {
	call := &Call{ID: 5, Ops: []Op{{Kind: KindWrite, Session: 1, Seq: 2, Ino: 3, Data: bytes.Repeat([]byte("d"), 1<<20)}}}
	var w countingWriter
	if err := WritePrefixed(&w, CallFrame(call)); err != nil {
		t.Fatal(err)
	}
	if w.writes != 1 {
		t.Fatalf("a 1 MiB call frame took %d writes, want 1", w.writes)
	}
	body, err := ReadFrame(&w, MaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCall(body)
	if err != nil || !reflect.DeepEqual(*call, got) {
		t.Fatalf("call frame read back differs (%v)", err)
	}

	rep := &Reply{ID: 5, Results: []Result{{Data: []byte("x")}}}
	w = countingWriter{}
	if err := WritePrefixed(&w, ReplyFrame(FrameReply, rep)); err != nil || w.writes != 1 {
		t.Fatalf("reply frame: %v, %d writes", err, w.writes)
	}
	body, err = ReadFrame(&w, MaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	if _, back, err := DecodeReply(body); err != nil || !reflect.DeepEqual(*rep, back) {
		t.Fatalf("reply frame read back differs (%v)", err)
	}

	w = countingWriter{}
	if err := WriteFrame(&w, AppendCall(call)); err != nil || w.writes != 2 {
		t.Fatalf("WriteFrame of a 1 MiB body: %v, %d writes (the path the prefixed frames replace)", err, w.writes)
	}
}

// WritePrefixed refuses a buffer whose prefix does not give its length.
func TestWritePrefixedRefusesABodyWithoutItsPrefix(t *testing.T) {
	var w countingWriter
	if err := WritePrefixed(&w, AppendCall(sampleCall())); err == nil || w.writes != 0 {
		t.Fatalf("a body without its prefix was written (%v, %d writes)", err, w.writes)
	}
}
