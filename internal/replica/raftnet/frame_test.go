package raftnet

//lint:file-ignore SA1019 raft still sends and reads AppendEntriesRequest.Leader (a follower uses it when RPCHeader.Addr is empty), so the frame carries it.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

var testLimits = Limits{MaxEntries: 16, MaxEntryBytes: 1 << 20}

func encodeFrame(t testing.TB, req *raft.AppendEntriesRequest, lim Limits) []byte {
	t.Helper()
	var out bytes.Buffer
	w := bufio.NewWriterSize(&out, bufferSize)
	if err := writeAppendEntries(w, req, lim); err != nil {
		t.Fatalf("encode: %v", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if out.Bytes()[0] != byte(rpcAppendEntries) {
		t.Fatalf("frame starts with %#x, not the AppendEntries type", out.Bytes()[0])
	}
	return out.Bytes()[1:]
}

// viaMsgpack is what raft's NetworkTransport delivers to a follower for
// req: the reference the raw frame must agree with.
func viaMsgpack(t testing.TB, req *raft.AppendEntriesRequest) *raft.AppendEntriesRequest {
	t.Helper()
	mp := &codec.MsgpackHandle{}
	mp.TimeNotBuiltin = true
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, mp).Encode(req); err != nil {
		t.Fatal(err)
	}
	var got raft.AppendEntriesRequest
	if err := codec.NewDecoder(&buf, mp).Decode(&got); err != nil {
		t.Fatal(err)
	}
	return &got
}

// sameRequest compares two requests as raft reads them: byte strings by
// content (nil and empty alike), times by instant.
func sameRequest(t testing.TB, what string, got, want *raft.AppendEntriesRequest) {
	t.Helper()
	if got.ProtocolVersion != want.ProtocolVersion || got.Term != want.Term || got.PrevLogEntry != want.PrevLogEntry ||
		got.PrevLogTerm != want.PrevLogTerm || got.LeaderCommitIndex != want.LeaderCommitIndex ||
		!bytes.Equal(got.ID, want.ID) || !bytes.Equal(got.Addr, want.Addr) || !bytes.Equal(got.Leader, want.Leader) {
		t.Fatalf("%s: header %+v, want %+v", what, got.RPCHeader, want.RPCHeader)
	}
	if len(got.Entries) != len(want.Entries) {
		t.Fatalf("%s: %d entries, want %d", what, len(got.Entries), len(want.Entries))
	}
	for i, g := range got.Entries {
		w := want.Entries[i]
		if g.Index != w.Index || g.Term != w.Term || g.Type != w.Type || !bytes.Equal(g.Data, w.Data) ||
			!bytes.Equal(g.Extensions, w.Extensions) || !g.AppendedAt.Equal(w.AppendedAt) {
			t.Fatalf("%s: entry %d is {%d %d %v %d bytes %d ext %v}, want {%d %d %v %d bytes %d ext %v}", what, i,
				g.Index, g.Term, g.Type, len(g.Data), len(g.Extensions), g.AppendedAt,
				w.Index, w.Term, w.Type, len(w.Data), len(w.Extensions), w.AppendedAt)
		}
		if cap(g.Data) != len(g.Data) {
			t.Fatalf("%s: entry %d's Data has spare capacity %d: an append would overwrite the next entry", what, i, cap(g.Data)-len(g.Data))
		}
	}
}

// FuzzAppendEntriesFrameRoundTrip: whatever raft puts in a request comes out
// of the raw frame as it comes out of raft's msgpack codec.
func FuzzAppendEntriesFrameRoundTrip(f *testing.F) {
	f.Add(uint64(3), uint64(7), uint64(6), uint64(5), []byte("r0"), []byte("vol-r0@127.0.0.1:1"), uint8(2), []byte("data"), []byte{}, int64(1700000000123456789))
	f.Add(uint64(0), uint64(0), uint64(0), uint64(0), []byte{}, []byte{}, uint8(0), []byte{}, []byte("x"), int64(0))
	f.Fuzz(func(t *testing.T, term, prev, prevTerm, commit uint64, id, addr []byte, n uint8, data, ext []byte, at int64) {
		if len(id) > maxNameBytes || len(addr) > maxNameBytes {
			t.Skip("names beyond the bound are refused, see TestOversizedOrMalformedFramesAreRefused")
		}
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: id, Addr: addr},
			Term:      term, Leader: addr, PrevLogEntry: prev, PrevLogTerm: prevTerm, LeaderCommitIndex: commit,
		}
		for i := range int(n % uint8(testLimits.MaxEntries+1)) {
			e := &raft.Log{Index: prev + uint64(i) + 1, Term: term, Type: raft.LogType(i % 6)}
			// Entries differ in payload so a mix-up of their slices shows.
			e.Data = append(append([]byte{}, data...), byte(i))
			if i%2 == 1 {
				e.Extensions = ext
			}
			if at != 0 && i%3 != 2 {
				e.AppendedAt = time.Unix(0, at+int64(i))
			}
			req.Entries = append(req.Entries, e)
		}
		got, err := readAppendEntries(bytes.NewReader(encodeFrame(t, req, testLimits)), testLimits, nil)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		sameRequest(t, "raw frame against the request", got, req)
		sameRequest(t, "raw frame against raft's msgpack", got, viaMsgpack(t, req))
	})
}

func TestLargeEntriesRoundTripAtTheBound(t *testing.T) {
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("r0"), Addr: []byte("a")}, Term: 2, PrevLogEntry: 9, PrevLogTerm: 2}
	for i := range testLimits.MaxEntries {
		d := bytes.Repeat([]byte{byte(i)}, testLimits.MaxEntryBytes-i)
		req.Entries = append(req.Entries, &raft.Log{Index: uint64(10 + i), Term: 2, Type: raft.LogCommand, Data: d, Extensions: make([]byte, i)})
	}
	got, err := readAppendEntries(bufio.NewReaderSize(bytes.NewReader(encodeFrame(t, req, testLimits)), bufferSize), testLimits, nil)
	if err != nil {
		t.Fatalf("a request of %d entries of %d bytes, the limits, was refused: %v", testLimits.MaxEntries, testLimits.MaxEntryBytes, err)
	}
	sameRequest(t, "request at the bound", got, req)
}

// frameHead builds a frame's fixed part with the given counts.
func frameHead(body uint32, names [3]uint16, count uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, body)
	b = append(b, make([]byte, 5*8)...)
	for _, n := range names {
		b = binary.BigEndian.AppendUint16(b, n)
	}
	return binary.BigEndian.AppendUint32(b, count)
}

func TestOversizedOrMalformedFramesAreRefused(t *testing.T) {
	valid := encodeFrame(t, &raft.AppendEntriesRequest{Term: 1, Entries: []*raft.Log{{Index: 1, Term: 1, Data: []byte("abcdef")}}}, testLimits)
	withEntryLen := func(n uint32) []byte {
		b := bytes.Clone(valid)
		binary.BigEndian.PutUint32(b[4+reqFixed+26:], n)
		return b
	}
	bodyPlus := func(d int) []byte {
		b := bytes.Clone(valid)
		binary.BigEndian.PutUint32(b, uint32(int(binary.BigEndian.Uint32(b))+d))
		return b
	}
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"body beyond max entries × max entry bytes + header", frameHead(uint32(testLimits.maxBody()+1), [3]uint16{}, 0), ErrFrameTooLarge},
		{"body of 4 GiB", frameHead(^uint32(0), [3]uint16{}, 0), ErrFrameTooLarge},
		{"more entries than MaxAppendEntries", frameHead(reqFixed+17*entryFixed, [3]uint16{}, 17), ErrFrameTooLarge},
		{"sender ID beyond its bound", frameHead(reqFixed+maxNameBytes+1, [3]uint16{maxNameBytes + 1}, 0), ErrFrameTooLarge},
		{"an entry beyond the max entry bytes", withEntryLen(uint32(testLimits.MaxEntryBytes + 1)), ErrFrameTooLarge},
		{"an entry longer than the body holds", withEntryLen(7), ErrMalformedFrame},
		{"an entry shorter than the body holds", withEntryLen(5), ErrMalformedFrame},
		{"body shorter than its fixed fields", frameHead(reqFixed-1, [3]uint16{}, 0), ErrMalformedFrame},
		{"entry headers beyond the body", frameHead(reqFixed+entryFixed-1, [3]uint16{}, 1), ErrMalformedFrame},
		{"bytes left after a request without entries", append(frameHead(reqFixed+1, [3]uint16{}, 0), 0), ErrMalformedFrame},
		{"body longer than its parts", append(bodyPlus(1), 0), ErrMalformedFrame},
		{"stream cut inside the payload", valid[:len(valid)-1], io.ErrUnexpectedEOF},
		{"stream cut inside the fixed fields", valid[:10], io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := readAppendEntries(bytes.NewReader(c.frame), testLimits, nil)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, c.want) {
				t.Fatalf("frame accepted or refused for another reason: %v, want %v", err, c.want)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
				t.Fatalf("a refused frame allocated %d bytes before it was refused", n)
			}
		})
	}
}

func TestCoordinatorRefusesToSendWhatFollowersRefuse(t *testing.T) {
	big := &raft.AppendEntriesRequest{Entries: []*raft.Log{{Data: make([]byte, testLimits.MaxEntryBytes+1)}}}
	w := bufio.NewWriter(io.Discard)
	if err := writeAppendEntries(w, big, testLimits); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("an entry beyond the limit was encoded: %v", err)
	}
	if w.Buffered() != 0 {
		t.Fatalf("a refused request left %d bytes in the connection's buffer", w.Buffered())
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// The admission hook sees a request's payload size before any payload is
// read, its refusal refuses the frame, and a heartbeat never calls it.
func TestAdmitRunsBeforeThePayloadIsRead(t *testing.T) {
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("r0")}, Term: 3}
	for i := range 3 {
		req.Entries = append(req.Entries, &raft.Log{Index: uint64(1 + i), Term: 3, Data: bytes.Repeat([]byte{1}, 1000), Extensions: []byte("x")})
	}
	frame := encodeFrame(t, req, testLimits)
	r := &countingReader{r: bytes.NewReader(frame)}
	full := errors.New("no room")
	var seen int64
	_, err := readAppendEntries(r, testLimits, func(payload int64) error {
		seen = payload
		if rest := len(frame) - r.n; int64(rest) != payload {
			t.Errorf("admit ran with %d bytes of the frame unread, want the %d bytes of payload", rest, payload)
		}
		return full
	})
	if !errors.Is(err, full) {
		t.Fatalf("a refused admission gave %v, want the hook's error", err)
	}
	if seen != 3*1001 {
		t.Fatalf("admit saw a payload of %d bytes, want %d", seen, 3*1001)
	}
	heartbeat := encodeFrame(t, &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("r0")}, Term: 3}, testLimits)
	if _, err := readAppendEntries(bytes.NewReader(heartbeat), testLimits, func(int64) error {
		t.Fatal("admit ran for a request without entries")
		return nil
	}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
}
