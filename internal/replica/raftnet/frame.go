package raftnet

//lint:file-ignore SA1019 raft still sends and reads AppendEntriesRequest.Leader (a follower uses it when RPCHeader.Addr is empty), so the frame carries it.

// The AppendEntries frame. After the RPC type byte (rpcAppendEntries):
//
//	u32 body length: every byte after this field
//	u64 protocol version, term, previous index, previous term, commit index
//	u16 lengths of the sender's ID, address and (deprecated) leader address
//	u32 number of entries
//	the ID, address and leader bytes
//	per entry: u64 index, u64 term, u8 type, u8 flags, i64 appended-at
//	           (Unix nanoseconds, flagAppendedAt set when not zero),
//	           u32 Data length, u32 Extensions length
//	per entry: Data, then Extensions, verbatim
//
// All integers are big-endian. The body length is checked against the
// configured bound before anything is allocated for it, every length inside
// against its own bound, and the lengths must add up to the body exactly, so
// a frame is either accepted whole or refused (see readAppendEntries).
//
// Entry headers come before all payloads so that a follower checks every
// length before it allocates or reads any payload. Each entry gets one buffer
// of exactly its size (Data and Extensions share it), read with one ReadFull,
// which the bufio.Reader passes straight to the socket once its own buffer is
// drained. Not one buffer per request: the journal's memory cache keeps the
// newest entries, and one of them would pin a whole request's buffer (up to
// MaxEntries × MaxEntryBytes), which a catching-up follower's RSS showed.
// On the coordinator the payloads are written from the entries' own slices
// through the connection's bufio.Writer: one copy into the buffer for what
// fits, the rest handed to TLS in large writes, so records are full size.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
)

// Version is the first byte of a raft connection in each direction. raft's
// NetworkTransport begins with an RPC type (0 to 4), never a value with the
// high bit set, so the two refuse each other on the first byte.
type Version byte

// Version1 is this transport: raw AppendEntries frames, msgpack otherwise.
const Version1 Version = 0x81

// rpcType is the byte before each request.
type rpcType uint8

const (
	rpcAppendEntries rpcType = iota + 1
	rpcRequestVote
	rpcRequestPreVote
	rpcInstallSnapshot
	rpcTimeoutNow
)

const (
	// reqFixed is the request's fixed part after the body length.
	reqFixed = 5*8 + 3*2 + 4
	// entryFixed is one entry's fixed part.
	entryFixed = 8 + 8 + 1 + 1 + 8 + 4 + 4
	// maxNameBytes bounds the sender's ID and each address.
	maxNameBytes = 1 << 10
	// flagAppendedAt: the entry carries a non-zero AppendedAt.
	flagAppendedAt = 1 << 0
)

// Limits bound what one AppendEntries request may carry; a follower
// refuses larger frames before allocating for them.
type Limits struct {
	MaxEntries    int // raft's MaxAppendEntries
	MaxEntryBytes int // one entry's Data plus Extensions
}

func (l Limits) validate() error {
	if l.MaxEntries <= 0 || l.MaxEntryBytes <= 0 {
		return fmt.Errorf("raft transport limits need MaxEntries and MaxEntryBytes, got %d and %d", l.MaxEntries, l.MaxEntryBytes)
	}
	return nil
}

// maxBody is the largest body length a frame within the limits has.
func (l Limits) maxBody() int64 {
	return reqFixed + 3*maxNameBytes + int64(l.MaxEntries)*(entryFixed+int64(l.MaxEntryBytes))
}

var (
	// ErrFrameTooLarge refuses a frame beyond the configured limits.
	ErrFrameTooLarge = errors.New("raft frame beyond the transport's limits")
	// ErrMalformedFrame refuses a frame whose lengths do not add up.
	ErrMalformedFrame = errors.New("malformed raft frame")
)

// bodyLen is the body length of req's frame, or an error when req exceeds
// lim: the coordinator refuses to send what its followers would refuse.
func bodyLen(req *raft.AppendEntriesRequest, lim Limits) (int64, error) {
	if len(req.ID) > maxNameBytes || len(req.Addr) > maxNameBytes || len(req.Leader) > maxNameBytes {
		return 0, fmt.Errorf("%w: sender ID or address longer than %d bytes", ErrFrameTooLarge, maxNameBytes)
	}
	if len(req.Entries) > lim.MaxEntries {
		return 0, fmt.Errorf("%w: %d entries, at most %d", ErrFrameTooLarge, len(req.Entries), lim.MaxEntries)
	}
	n := int64(reqFixed + len(req.ID) + len(req.Addr) + len(req.Leader) + len(req.Entries)*entryFixed)
	for _, e := range req.Entries {
		p := len(e.Data) + len(e.Extensions)
		if p > lim.MaxEntryBytes {
			return 0, fmt.Errorf("%w: entry %d carries %d bytes, at most %d", ErrFrameTooLarge, e.Index, p, lim.MaxEntryBytes)
		}
		n += int64(p)
	}
	return n, nil
}

// writeAppendEntries writes req's frame, type byte included, into w. The
// caller flushes.
func writeAppendEntries(w *bufio.Writer, req *raft.AppendEntriesRequest, lim Limits) error {
	n, err := bodyLen(req, lim)
	if err != nil {
		return err
	}
	b := w.AvailableBuffer()
	b = append(b, byte(rpcAppendEntries))
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint64(b, uint64(req.ProtocolVersion))
	b = binary.BigEndian.AppendUint64(b, req.Term)
	b = binary.BigEndian.AppendUint64(b, req.PrevLogEntry)
	b = binary.BigEndian.AppendUint64(b, req.PrevLogTerm)
	b = binary.BigEndian.AppendUint64(b, req.LeaderCommitIndex)
	b = binary.BigEndian.AppendUint16(b, uint16(len(req.ID)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(req.Addr)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(req.Leader)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(req.Entries)))
	b = append(b, req.ID...)
	b = append(b, req.Addr...)
	b = append(b, req.Leader...)
	for _, e := range req.Entries {
		b = appendEntryHeader(b, e)
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	for _, e := range req.Entries {
		if _, err := w.Write(e.Data); err != nil {
			return err
		}
		if _, err := w.Write(e.Extensions); err != nil {
			return err
		}
	}
	return nil
}

func appendEntryHeader(b []byte, e *raft.Log) []byte {
	var flags byte
	var at int64
	if !e.AppendedAt.IsZero() {
		flags |= flagAppendedAt
		at = e.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, e.Index)
	b = binary.BigEndian.AppendUint64(b, e.Term)
	b = append(b, byte(e.Type), flags)
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Data)))
	return binary.BigEndian.AppendUint32(b, uint32(len(e.Extensions)))
}

// readAppendEntries reads one frame after its type byte. Nothing is
// allocated for a length before it is checked against lim and against the
// body length, itself checked against lim first. admit, when not nil, is
// called with the payload's size once the headers are checked, before the
// payloads are allocated or read; its error refuses the frame.
func readAppendEntries(r io.Reader, lim Limits, admit func(payload int64) error) (*raft.AppendEntriesRequest, error) {
	var fixed [4 + reqFixed]byte
	if _, err := io.ReadFull(r, fixed[:4]); err != nil {
		return nil, err
	}
	body := int64(binary.BigEndian.Uint32(fixed[:4]))
	if body > lim.maxBody() {
		return nil, fmt.Errorf("%w: body of %d bytes, at most %d", ErrFrameTooLarge, body, lim.maxBody())
	}
	if body < reqFixed {
		return nil, fmt.Errorf("%w: body of %d bytes, shorter than its fixed fields", ErrMalformedFrame, body)
	}
	if _, err := io.ReadFull(r, fixed[4:]); err != nil {
		return nil, noEOF(err)
	}
	f := fixed[4:]
	req := &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(int64(binary.BigEndian.Uint64(f[0:])))},
		Term:              binary.BigEndian.Uint64(f[8:]),
		PrevLogEntry:      binary.BigEndian.Uint64(f[16:]),
		PrevLogTerm:       binary.BigEndian.Uint64(f[24:]),
		LeaderCommitIndex: binary.BigEndian.Uint64(f[32:]),
	}
	idLen, addrLen, leaderLen := int64(binary.BigEndian.Uint16(f[40:])), int64(binary.BigEndian.Uint16(f[42:])), int64(binary.BigEndian.Uint16(f[44:]))
	count := int64(binary.BigEndian.Uint32(f[46:]))
	if idLen > maxNameBytes || addrLen > maxNameBytes || leaderLen > maxNameBytes {
		return nil, fmt.Errorf("%w: sender ID or address longer than %d bytes", ErrFrameTooLarge, maxNameBytes)
	}
	if count > int64(lim.MaxEntries) {
		return nil, fmt.Errorf("%w: %d entries, at most %d", ErrFrameTooLarge, count, lim.MaxEntries)
	}
	names := idLen + addrLen + leaderLen
	heads := reqFixed + names + count*entryFixed
	if heads > body {
		return nil, fmt.Errorf("%w: %d bytes of fields in a body of %d", ErrMalformedFrame, heads, body)
	}
	meta := make([]byte, names+count*entryFixed)
	if _, err := io.ReadFull(r, meta); err != nil {
		return nil, noEOF(err)
	}
	req.ID, req.Addr, req.Leader = nonEmpty(meta[:idLen:idLen]), nonEmpty(meta[idLen:idLen+addrLen:idLen+addrLen]), nonEmpty(meta[idLen+addrLen:names:names])
	if count == 0 {
		if heads != body {
			return nil, fmt.Errorf("%w: %d bytes after the fields of a request without entries", ErrMalformedFrame, body-heads)
		}
		return req, nil
	}
	logs := make([]raft.Log, count)
	req.Entries = make([]*raft.Log, count)
	lens := make([][2]int64, count)
	var payload int64
	for i := range logs {
		h := meta[names+int64(i)*entryFixed:]
		e := &logs[i]
		e.Index = binary.BigEndian.Uint64(h[0:])
		e.Term = binary.BigEndian.Uint64(h[8:])
		e.Type = raft.LogType(h[16])
		if h[17]&flagAppendedAt != 0 {
			e.AppendedAt = time.Unix(0, int64(binary.BigEndian.Uint64(h[18:])))
		}
		lens[i] = [2]int64{int64(binary.BigEndian.Uint32(h[26:])), int64(binary.BigEndian.Uint32(h[30:]))}
		if lens[i][0]+lens[i][1] > int64(lim.MaxEntryBytes) {
			return nil, fmt.Errorf("%w: entry %d carries %d bytes, at most %d", ErrFrameTooLarge, e.Index, lens[i][0]+lens[i][1], lim.MaxEntryBytes)
		}
		payload += lens[i][0] + lens[i][1]
		req.Entries[i] = e
	}
	if heads+payload != body {
		return nil, fmt.Errorf("%w: fields and payloads of %d bytes in a body of %d", ErrMalformedFrame, heads+payload, body)
	}
	if admit != nil {
		if err := admit(payload); err != nil {
			return nil, err
		}
	}
	for i := range logs {
		d, x := lens[i][0], lens[i][1]
		buf := make([]byte, d+x)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, noEOF(err)
		}
		logs[i].Data = nonEmpty(buf[:d:d])
		logs[i].Extensions = nonEmpty(buf[d:])
	}
	return req, nil
}

// nonEmpty keeps msgpack's decoding of an empty byte string: nil.
func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// noEOF: a stream ending inside a frame is a truncated frame, not a clean
// close between requests.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
