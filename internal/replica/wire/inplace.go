package wire

// A read's reply is almost all data. Rather than read the file into one
// buffer and copy it into the reply frame, the host reads it into a pooled
// buffer at ReplyHeadroom and the frame's header is written in front of it:
// one buffer, sized once, and the bytes leave for TLS where the disk put them.

// ReplyHeadroom is the room ReadBuffer leaves before the data for the reply
// frame's length prefix, header and the result's fields before its data.
// A header that does not fit (long leader names or message) falls back to
// the copying encoder.
const ReplyHeadroom = 512

// replyTailroom is the room after the data for the result's remaining
// fields (counts and statfs, a few bytes for a read).
const replyTailroom = 64

// ReadBuffer returns a pooled buffer for a read of n bytes and the slice of
// it at ReplyHeadroom to read them into. Put both into the Result (Data,
// Frame); Reply.Release returns the buffer after the reply is sent.
func ReadBuffer(n int) (frame, data []byte) {
	frame = GetBuf(ReplyHeadroom + n + replyTailroom)
	return frame, frame[ReplyHeadroom : ReplyHeadroom+n : ReplyHeadroom+n]
}

// replyInPlace builds the frame of a one-result reply around data already
// in its ReadBuffer; ok is false when the reply is not of that shape.
func replyInPlace(t FrameType, r *Reply) (frame []byte, ok bool) {
	if len(r.Results) != 1 {
		return nil, false
	}
	res := &r.Results[0]
	buf := res.Frame
	n := len(res.Data)
	if n == 0 || len(buf) < ReplyHeadroom+n+replyTailroom || &buf[ReplyHeadroom] != &res.Data[0] {
		return nil, false
	}
	var scratch [ReplyHeadroom]byte
	head := encoder{b: scratch[:frameHeader]}
	head.replyHead(t, r)
	head.resultHead(res)
	if len(head.b) > ReplyHeadroom {
		return nil, false
	}
	start := ReplyHeadroom - len(head.b)
	copy(buf[start:], head.b)
	e := encoder{b: buf[start : ReplyHeadroom+n]}
	// The tail fits replyTailroom for a read; were it longer, append would
	// move the frame to a new array, still correct.
	e.resultTail(res)
	return e.frame(), true
}
