package wire

import (
	"encoding/binary"
	"fmt"
	"io"
)

// FrameType is the first byte of every frame on a client RPC stream.
type FrameType uint8

// Frame types.
const (
	FrameHello      FrameType = 1 // client → worker: bearer token and client ID
	FrameHelloReply FrameType = 2
	FrameCall       FrameType = 3 // client → worker: one batch of operations
	FrameReply      FrameType = 4
)

// Status is the transport-level outcome of a call; per-operation errors are
// errnos inside each Result.
type Status uint8

// Call statuses.
const (
	// StatusOK: the results are authoritative.
	StatusOK Status = iota
	// StatusNotCoordinator: this worker does not lead; LeaderID,
	// LeaderAddr and LeaderServerName name the current coordinator when
	// known (hint.go). Nothing was applied.
	StatusNotCoordinator
	// StatusUncertain: the call was proposed but its outcome is unknown
	// (leadership lost before commit). A retry with the same identity is
	// safe and returns the first result if it did apply.
	StatusUncertain
	// StatusUnavailable: no quorum or the worker is not serving; nothing was
	// applied.
	StatusUnavailable
	// StatusSessionExpired: the client's session is not in the
	// exactly-once table (never registered or evicted). Nothing was applied.
	StatusSessionExpired
	// StatusUnauthorized: bad or missing bearer token.
	StatusUnauthorized
	// StatusBadRequest: the call is malformed or exceeds a limit.
	StatusBadRequest
	// StatusFenced: the call's fencing epoch was superseded by a newer
	// single-writer mount of the volume. Nothing was applied or read.
	StatusFenced
	statusEnd
)

var statusNames = [...]string{"ok", "not coordinator", "uncertain", "unavailable",
	"session expired", "unauthorized", "bad request", "fenced"}

func (s Status) String() string {
	if s < statusEnd {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Hello authenticates a stream.
type Hello struct {
	Token    string
	ClientID uint64
}

// Call is one request: Ops are all queries (exactly one) or all mutations
// (one or more, applied in one log entry, each with its own sequence).
type Call struct {
	ID  uint64
	Ops []Op

	// frame is the buffer the call was read into (ReadCallFrame) and opsAt
	// the index of its first operation in it; EntryInPlace builds the log
	// entry there.
	frame []byte
	opsAt int
}

// Reply answers a Call (or a Hello, with ID 0 and no results).
type Reply struct {
	ID         uint64
	Status     Status
	Message    string
	LeaderID   string
	LeaderAddr string
	// LeaderServerName is the TLS server name the coordinator's
	// certificate carries, so a client can follow a coordinator it was not
	// configured with (hint.go); empty from workers that predate it.
	LeaderServerName string
	Results          []Result
}

// AppendHello encodes a hello frame (without the length prefix).
func AppendHello(h *Hello) []byte {
	e := newEncoder(16 + len(h.Token))
	e.byte1(uint8(FrameHello))
	e.str(h.Token)
	e.u(h.ClientID)
	return e.b
}

// AppendCall encodes a call frame body.
func AppendCall(c *Call) []byte { return CallFrame(c)[frameHeader:] }

// CallFrame encodes a call as a whole frame, length prefix included, for
// WritePrefixed: one buffer, so the prefix and the body leave in one write
// (one TLS record for small frames instead of a 4-byte record of its own).
func CallFrame(c *Call) []byte {
	e := newFrameEncoder(16 + opsSize(c.Ops))
	e.callBody(c)
	return e.frame()
}

// PooledCallFrame is CallFrame built in a buffer from the frame pools
// (bufpool.go): a client's write call carries up to 4 MiB of data, and a
// fresh frame per call was a new, zeroed, first-touched buffer of that size
// on every call (`wire.CallFrame`, 6 % of the benchmark process in the
// mount's 1 MiB write profile). The caller returns it with PutBuf once the
// frame is written; an encoding larger than the estimate grows out of the
// pooled buffer and PutBuf then drops it.
func PooledCallFrame(c *Call) []byte {
	e := &encoder{b: GetBuf(frameHeader + 16 + opsSize(c.Ops))[:frameHeader]}
	e.callBody(c)
	return e.frame()
}

func (e *encoder) callBody(c *Call) {
	e.byte1(uint8(FrameCall))
	e.u(c.ID)
	e.u(uint64(len(c.Ops)))
	for i := range c.Ops {
		e.op(&c.Ops[i])
	}
}

// AppendReply encodes a reply frame body of the given type.
func AppendReply(t FrameType, r *Reply) []byte { return ReplyFrame(t, r)[frameHeader:] }

// ReplyFrame encodes a reply as a whole frame, length prefix included, for
// WritePrefixed.
func ReplyFrame(t FrameType, r *Reply) []byte {
	if f, ok := replyInPlace(t, r); ok {
		return f
	}
	e := newFrameEncoder(64 + resultsSize(r.Results))
	e.replyHead(t, r)
	for i := range r.Results {
		e.result(&r.Results[i])
	}
	return e.frame()
}

func (e *encoder) replyHead(t FrameType, r *Reply) {
	e.byte1(uint8(t))
	e.u(r.ID)
	e.byte1(uint8(r.Status))
	e.str(r.Message)
	e.str(r.LeaderID)
	e.str(r.leaderAddrField())
	e.u(uint64(len(r.Results)))
}

// Release returns the results' pooled buffers (Result.Frame) once the reply
// is sent: nothing may use the reply's data afterwards.
func (r *Reply) Release() {
	for i := range r.Results {
		if f := r.Results[i].Frame; f != nil {
			r.Results[i].Frame, r.Results[i].Data = nil, nil
			PutBuf(f)
		}
	}
}

// frameHeader is the length prefix of every frame.
const frameHeader = 4

// newFrameEncoder starts a frame with room for its length prefix.
func newFrameEncoder(n int) *encoder {
	e := newEncoder(frameHeader + n)
	e.b = e.b[:frameHeader]
	return e
}

// frame fills in the length prefix and returns the whole frame.
func (e *encoder) frame() []byte {
	binary.BigEndian.PutUint32(e.b, uint32(len(e.b)-frameHeader))
	return e.b
}

// DecodeHello decodes a hello frame body.
func DecodeHello(b []byte) (Hello, error) {
	d := &decoder{b: b}
	var h Hello
	if t := FrameType(d.byte1("frame type")); d.err == nil && t != FrameHello {
		return h, fmt.Errorf("%w: expected hello, got frame type %d", ErrMalformed, t)
	}
	h.Token = d.str("token", MaxToken)
	h.ClientID = d.u("client id")
	return h, d.end()
}

// DecodeCall decodes a call frame body. Every operation must be a known
// kind, and a call mixes no queries with mutations.
func DecodeCall(b []byte) (Call, error) {
	c, _, err := decodeCall(b)
	return c, err
}

// decodeCall is DecodeCall, also returning where the operations start in b.
func decodeCall(b []byte) (c Call, opsAt int, err error) {
	d := &decoder{b: b}
	if t := FrameType(d.byte1("frame type")); d.err == nil && t != FrameCall {
		return c, 0, fmt.Errorf("%w: expected call, got frame type %d", ErrMalformed, t)
	}
	c.ID = d.u("call id")
	n := d.count("ops", MaxOps)
	if d.err == nil && n == 0 {
		return c, 0, fmt.Errorf("%w: call without operations", ErrMalformed)
	}
	opsAt = len(b) - len(d.b)
	c.Ops = make([]Op, n)
	for i := range c.Ops {
		d.op(&c.Ops[i])
	}
	if err := d.end(); err != nil {
		return c, 0, err
	}
	return c, opsAt, validateCall(c.Ops)
}

func validateCall(ops []Op) error {
	mut := ops[0].Kind.Mutates()
	if !mut && len(ops) != 1 {
		return fmt.Errorf("%w: a query call carries exactly one operation, got %d", ErrMalformed, len(ops))
	}
	for i := range ops {
		if ops[i].Kind.Mutates() != mut {
			return fmt.Errorf("%w: call mixes queries and mutations", ErrMalformed)
		}
	}
	return nil
}

// DecodeReply decodes a reply or hello-reply frame body.
func DecodeReply(b []byte) (FrameType, Reply, error) {
	d := &decoder{b: b}
	var r Reply
	t := FrameType(d.byte1("frame type"))
	if d.err == nil && t != FrameReply && t != FrameHelloReply {
		return t, r, fmt.Errorf("%w: expected reply, got frame type %d", ErrMalformed, t)
	}
	r.ID = d.u("call id")
	r.Status = Status(d.byte1("status"))
	if d.err == nil && r.Status >= statusEnd {
		return t, r, fmt.Errorf("%w: unknown status %d", ErrMalformed, r.Status)
	}
	r.Message = d.str("message", MaxMessage)
	r.LeaderID = d.str("leader id", MaxName)
	r.setLeaderAddrField(d.str("leader address", MaxName))
	if n := d.count("results", MaxOps); n > 0 {
		r.Results = make([]Result, n)
		for i := range r.Results {
			d.result(&r.Results[i])
		}
	}
	return t, r, d.end()
}

// WriteFrame writes one length-prefixed frame.
func WriteFrame(w io.Writer, body []byte) error {
	if len(body) > MaxFrame {
		return fmt.Errorf("frame of %d bytes exceeds the %d byte limit", len(body), MaxFrame)
	}
	var hdr [frameHeader]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	if len(body) > 64<<10 {
		// Large frames: two writes instead of copying the body.
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		_, err := w.Write(body)
		return err
	}
	buf := make([]byte, 0, frameHeader+len(body))
	_, err := w.Write(append(append(buf, hdr[:]...), body...))
	return err
}

// WritePrefixed writes a frame from CallFrame or ReplyFrame (length prefix
// included) in one write.
func WritePrefixed(w io.Writer, frame []byte) error {
	if len(frame) < frameHeader || int(binary.BigEndian.Uint32(frame)) != len(frame)-frameHeader {
		return fmt.Errorf("frame of %d bytes without its length prefix", len(frame))
	}
	if len(frame)-frameHeader > MaxFrame {
		return fmt.Errorf("frame of %d bytes exceeds the %d byte limit", len(frame)-frameHeader, MaxFrame)
	}
	_, err := w.Write(frame)
	return err
}

// ErrFrameTooLarge reports a length prefix beyond MaxFrame.
var ErrFrameTooLarge = fmt.Errorf("%w: frame too large", ErrMalformed)

// ReadFrame reads one length-prefixed frame, refusing lengths beyond limit
// before allocating.
func ReadFrame(r io.Reader, limit int) ([]byte, error) {
	return readFrameRoom(r, limit, 0)
}

// readFrameRoom is ReadFrame with room bytes free in front of the body,
// which starts at buf[room].
func readFrameRoom(r io.Reader, limit, room int) (buf []byte, err error) {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(limit) {
		return nil, fmt.Errorf("%w: length prefix %d exceeds the %d byte limit", ErrFrameTooLarge, n, limit)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: empty frame", ErrMalformed)
	}
	// Pooled: a reply carrying read data hands the body on (Result.Frame)
	// and the FUSE read reply returns it after the kernel has the bytes;
	// other bodies are left to the collector.
	buf = GetBuf(room + int(n))
	if _, err := io.ReadFull(r, buf[room:]); err != nil {
		return nil, fmt.Errorf("reading %d byte frame: %w", n, err)
	}
	return buf, nil
}
