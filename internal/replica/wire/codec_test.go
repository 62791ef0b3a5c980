package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sampleCall() *Call {
	return &Call{ID: 9, Ops: []Op{
		{Kind: KindWrite, Session: 3, Seq: 4, Acked: 2, Ino: 12, Offset: 4096, Data: []byte("hello"), Epoch: 2},
		{Kind: KindRename, Session: 3, Seq: 5, Ino: 1, Name: "a", Ino2: 7, Name2: "b", Flags: RenameExchange},
	}}
}

func TestCallRoundTripsThroughTheCodec(t *testing.T) {
	in := sampleCall()
	out, err := DecodeCall(AppendCall(in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*in, out) {
		t.Fatalf("decoded call differs:\n in %+v\nout %+v", *in, out)
	}
}

func TestReplyAndEntryRoundTrip(t *testing.T) {
	rep := &Reply{ID: 4, Status: StatusNotCoordinator, Message: "m", LeaderID: "r1", LeaderAddr: "a:1",
		Results: []Result{{Errno: 2, Attr: Attr{Ino: 5, Mode: 0o100644, Size: 9, Mtime: -3}, Data: []byte("x"),
			Entries: []DirEntry{{Name: "f", Ino: 5, Mode: 0o100000}}, Names: []string{"user.a"}, StatFs: StatFs{Capacity: 10}}}}
	typ, got, err := DecodeReply(AppendReply(FrameReply, rep))
	if err != nil || typ != FrameReply || !reflect.DeepEqual(*rep, got) {
		t.Fatalf("reply round trip: %v %v\n in %+v\nout %+v", err, typ, *rep, got)
	}
	en := &Entry{Time: 77, Ops: sampleCall().Ops}
	back, err := DecodeEntry(EncodeEntry(en))
	if err != nil || !reflect.DeepEqual(*en, back) {
		t.Fatalf("entry round trip: %v", err)
	}
}

func TestEntryWrittenBeforeFencingDecodesWithEpochZero(t *testing.T) {
	op := Op{Kind: KindWrite, Session: 3, Seq: 4, Ino: 12, Data: []byte("hello")}
	v2 := EncodeEntry(&Entry{Time: 77, Ops: []Op{op}})
	if v2[0] != 2 || v2[len(v2)-1] != 0 {
		t.Fatalf("a version 2 entry of one unfenced op starts %d and ends %d, want 2 and a zero epoch", v2[0], v2[len(v2)-1])
	}
	// Version 1 is the same encoding without the trailing epoch.
	v1 := append([]byte{1}, v2[1:len(v2)-1]...)
	back, err := DecodeEntry(v1)
	if err != nil {
		t.Fatalf("a version 1 journal entry no longer decodes: %v", err)
	}
	if !reflect.DeepEqual(back.Ops, []Op{op}) {
		t.Fatalf("version 1 entry decoded as %+v", back.Ops)
	}
	if _, err := DecodeEntry(append([]byte{3}, v2[1:]...)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an entry of an unknown version decoded: %v", err)
	}
}

func TestDecodersRejectMalformedInput(t *testing.T) {
	good := AppendCall(sampleCall())
	cases := map[string][]byte{
		"empty":               {},
		"wrong frame type":    AppendHello(&Hello{Token: "t"}),
		"truncated":           good[:len(good)-3],
		"trailing bytes":      append(append([]byte{}, good...), 0),
		"unknown kind":        {byte(FrameCall), 1, 1, 0xEE},
		"no operations":       {byte(FrameCall), 1, 0},
		"huge op count":       {byte(FrameCall), 1, 0xFF, 0xFF, 0x03},
		"name over the limit": AppendCall(&Call{ID: 1, Ops: []Op{{Kind: KindCreate, Name: string(bytes.Repeat([]byte("n"), MaxName+1))}}}),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeCall(b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("want ErrMalformed, got %v", err)
			}
		})
	}
}

func TestReadFrameRefusesOversizedLengthBeforeAllocating(t *testing.T) {
	_, err := ReadFrame(bytes.NewReader([]byte{0x7F, 0xFF, 0xFF, 0xFF}), MaxFrame)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("want ErrFrameTooLarge, got %v", err)
	}
}

// FuzzDecodeCall: any input either fails with ErrMalformed or decodes to a
// call that re-encodes to a decodable, equal call. Never a panic.
func FuzzDecodeCall(f *testing.F) {
	f.Add(AppendCall(sampleCall()))
	f.Add(AppendCall(&Call{ID: 1, Ops: []Op{{Kind: KindGetattr, Ino: 1}}}))
	f.Add([]byte{byte(FrameCall), 1, 1, 0xEE})
	f.Add([]byte{byte(FrameCall), 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCall(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("decode error is not ErrMalformed: %v", err)
			}
			return
		}
		again, err := DecodeCall(AppendCall(&c))
		if err != nil || !reflect.DeepEqual(c, again) {
			t.Fatalf("re-encoded call does not round trip: %v", err)
		}
	})
}

func FuzzDecodeReply(f *testing.F) {
	f.Add(AppendReply(FrameReply, &Reply{ID: 1, Results: []Result{{Data: []byte("x")}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, err := DecodeReply(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("decode error is not ErrMalformed: %v", err)
		}
	})
}
