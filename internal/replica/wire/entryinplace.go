package wire

import (
	"bytes"
	"io"
)

// A write call is almost all data, and its log entry carries the same
// operations with another header: the coordinator re-encoded each call into a
// new entry buffer, one more allocation and copy of every written byte (what
// building the entry in place buys: docs/performance.md, "Data-path
// optimisations: what each buys"). A call read with ReadCallFrame has room in
// front for the entry's longer header, and EntryInPlace writes that header
// over the call's when the operations encode as the client sent them.

// callRoom is the room ReadCallFrame leaves in front of a call: the entry's
// header (version, time, operation count: at most 1+10+2 bytes) less the
// call's (frame type, call id, operation count: at least 3 bytes) is at most
// 10 bytes.
const callRoom = 16

// opScratch holds one operation's encoding without its data: a head with two
// names of MaxName bytes and every number at its longest, or a tail.
const opScratch = 1024

// ReadCallFrame is ReadFrame for a call: the body lies at callRoom in the
// returned buffer. Decode it with DecodeCallFrame.
func ReadCallFrame(r io.Reader, limit int) ([]byte, error) {
	return readFrameRoom(r, limit, callRoom)
}

// DecodeCallFrame decodes a buffer from ReadCallFrame; EntryInPlace may
// then build the call's log entry in it.
func DecodeCallFrame(buf []byte) (Call, error) {
	c, at, err := decodeCall(buf[callRoom:])
	if err == nil {
		c.frame, c.opsAt = buf, at+callRoom
	}
	return c, err
}

// EntryInPlace returns the log entry of c at time t, built in the buffer
// the call was read into, byte for byte what EncodeEntry returns. ok is
// false, and the buffer untouched, when c was not read with
// ReadCallFrame, when an operation no longer encodes as received (the
// coordinator stamped it), or when the buffer is much larger than the
// entry (the log would hold the difference): encode the entry then. On
// success the buffer belongs to the entry, which must not be modified; c's
// operations stay valid, their data now lying in the entry.
func EntryInPlace(c *Call, t int64) (entry []byte, ok bool) {
	buf := c.frame
	if buf == nil || !encodedAsReceived(buf, c.opsAt, c.Ops) {
		return nil, false
	}
	var scratch [callRoom]byte
	head := encoder{b: scratch[:0]}
	head.byte1(entryVersion)
	head.i(t)
	head.u(uint64(len(c.Ops)))
	start := c.opsAt - len(head.b)
	if start < 0 {
		return nil, false
	}
	entry = buf[start:]
	if n := len(entry); cap(entry)-n > n/8+poolSlack {
		return nil, false
	}
	copy(entry, head.b)
	c.frame = nil
	return entry, true
}

// encodedAsReceived reports whether ops, encoded, are buf[at:] with each
// operation's data lying where it was received.
func encodedAsReceived(buf []byte, at int, ops []Op) bool {
	var scratch [opScratch]byte
	same := func(e *encoder) bool {
		if len(e.b) > len(buf)-at || !bytes.Equal(buf[at:at+len(e.b)], e.b) {
			return false
		}
		at += len(e.b)
		return true
	}
	for i := range ops {
		o := &ops[i]
		e := encoder{b: scratch[:0]}
		e.opHead(o)
		e.u(uint64(len(o.Data)))
		if !same(&e) {
			return false
		}
		if n := len(o.Data); n > 0 {
			if n > len(buf)-at || &buf[at] != &o.Data[0] {
				return false
			}
			at += n
		}
		e.b = scratch[:0]
		e.opTail(o)
		if !same(&e) {
			return false
		}
	}
	return at == len(buf)
}
