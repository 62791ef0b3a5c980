package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Bounds on every decoded field. They are protocol limits, checked before
// allocation, so a hostile length prefix cannot make a worker allocate.
const (
	MaxName       = 255     // bytes in one path component or xattr name
	MaxData       = 4 << 20 // bytes of data in one op or result
	MaxOps        = 1024    // operations in one call or log entry
	MaxEntries    = 4096    // directory entries in one readdir result
	MaxMessage    = 1024    // bytes of an error message
	MaxToken      = 4096    // bytes of a bearer token
	MaxFrame      = 16 << 20
	MaxXattrValue = 64 << 10
	MaxSymlink    = 4095
)

// MaxFileSize is the largest file the volume holds (1 PiB): offsets and
// sizes stay far from overflowing off+len. The state machine refuses a
// write, truncate or allocation past it with EFBIG (EINVAL for fallocate),
// and the mount refuses such a write before queueing it.
const MaxFileSize = 1 << 50

// ErrMalformed reports input that does not decode.
var ErrMalformed = errors.New("malformed message")

type encoder struct{ b []byte }

func (e *encoder) u(v uint64)          { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) i(v int64)           { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) bytes(p []byte)      { e.u(uint64(len(p))); e.b = append(e.b, p...) }
func (e *encoder) str(s string)        { e.u(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) byte1(v uint8)       { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32)        { e.u(uint64(v)) }
func newEncoder(n int) *encoder        { return &encoder{b: make([]byte, 0, n)} }
func (d *decoder) fail(f string) error { return fmt.Errorf("%w: %s", ErrMalformed, f) }

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) u(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = d.fail(field)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) i(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = d.fail(field)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32(field string) uint32 {
	v := d.u(field)
	if v > 1<<32-1 && d.err == nil {
		d.err = d.fail(field + " out of range")
	}
	return uint32(v)
}

func (d *decoder) byte1(field string) uint8 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.err = d.fail(field)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) raw(field string, max int) []byte {
	n := d.u(field)
	if d.err != nil {
		return nil
	}
	if n > uint64(max) {
		d.err = fmt.Errorf("%w: %s is %d bytes, limit %d", ErrMalformed, field, n, max)
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = d.fail(field + " truncated")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// bytes aliases the input: every decoder input is a buffer owned by the
// caller for the decoded value's lifetime (a frame body, a journal entry),
// which saves copying megabytes of write data per operation.
func (d *decoder) bytes(field string, max int) []byte {
	v := d.raw(field, max)
	if len(v) == 0 {
		return nil
	}
	return v
}

func (d *decoder) str(field string, max int) string { return string(d.raw(field, max)) }

func (d *decoder) count(field string, max int) int {
	n := d.u(field)
	if d.err == nil && n > uint64(max) {
		d.err = fmt.Errorf("%w: %s count %d, limit %d", ErrMalformed, field, n, max)
	}
	// Every element takes at least one byte: a count beyond the remaining
	// input is a lie, reject it before allocating.
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = d.fail(field + " count exceeds input")
	}
	if d.err != nil {
		return 0
	}
	return int(n)
}

func (d *decoder) end() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b))
	}
	return nil
}

func (e *encoder) op(o *Op) {
	e.opHead(o)
	e.bytes(o.Data)
	e.opTail(o)
}

// opHead encodes an operation's fields before its data.
func (e *encoder) opHead(o *Op) {
	e.byte1(uint8(o.Kind))
	e.u(o.Session)
	e.u(o.Seq)
	e.u(o.Acked)
	e.u(o.Ino)
	e.u(o.Ino2)
	e.str(o.Name)
	e.str(o.Name2)
	e.u32(o.Mode)
	e.u32(o.UID)
	e.u32(o.GID)
	e.u32(o.Rdev)
	e.u32(o.Flags)
	e.u32(o.Valid)
	e.u(o.Offset)
	e.u(o.Size)
	e.i(o.Atime)
	e.i(o.Mtime)
}

// opTail encodes an operation's fields after its data.
func (e *encoder) opTail(o *Op) {
	e.u(o.NewIno)
	e.i(o.Time)
	e.u(o.Epoch)
}

func (d *decoder) op(o *Op) { d.opVersion(o, entryVersion) }

// opVersion decodes an operation as entry version v encoded it: version 1
// predates fencing and carries no epoch.
func (d *decoder) opVersion(o *Op, v uint8) {
	o.Kind = Kind(d.byte1("kind"))
	if d.err == nil && !o.Kind.Valid() {
		d.err = fmt.Errorf("%w: unknown operation %d", ErrMalformed, uint8(o.Kind))
		return
	}
	o.Session = d.u("session")
	o.Seq = d.u("seq")
	o.Acked = d.u("acked")
	o.Ino = d.u("ino")
	o.Ino2 = d.u("ino2")
	o.Name = d.str("name", MaxName)
	o.Name2 = d.str("name2", MaxName)
	o.Mode = d.u32("mode")
	o.UID = d.u32("uid")
	o.GID = d.u32("gid")
	o.Rdev = d.u32("rdev")
	o.Flags = d.u32("flags")
	o.Valid = d.u32("valid")
	o.Offset = d.u("offset")
	o.Size = d.u("size")
	o.Atime = d.i("atime")
	o.Mtime = d.i("mtime")
	o.Data = d.bytes("data", MaxData)
	o.NewIno = d.u("newino")
	o.Time = d.i("time")
	if v >= entryVersionFence {
		o.Epoch = d.u("epoch")
	}
}

func (e *encoder) attr(a *Attr) {
	e.u(a.Ino)
	e.u32(a.Mode)
	e.u32(a.Nlink)
	e.u32(a.UID)
	e.u32(a.GID)
	e.u32(a.Rdev)
	e.u(a.Size)
	e.i(a.Atime)
	e.i(a.Mtime)
	e.i(a.Ctime)
}

func (d *decoder) attr(a *Attr) {
	a.Ino = d.u("attr.ino")
	a.Mode = d.u32("attr.mode")
	a.Nlink = d.u32("attr.nlink")
	a.UID = d.u32("attr.uid")
	a.GID = d.u32("attr.gid")
	a.Rdev = d.u32("attr.rdev")
	a.Size = d.u("attr.size")
	a.Atime = d.i("attr.atime")
	a.Mtime = d.i("attr.mtime")
	a.Ctime = d.i("attr.ctime")
}

func (e *encoder) result(r *Result) {
	e.resultHead(r)
	e.b = append(e.b, r.Data...)
	e.resultTail(r)
}

// resultHead encodes a result up to and including its data's length: a
// read's reply frame is built around data already in place (ReadBuffer).
func (e *encoder) resultHead(r *Result) {
	e.u32(r.Errno)
	e.attr(&r.Attr)
	e.u(r.N)
	e.u(uint64(len(r.Data)))
}

// resultTail encodes what follows a result's data.
func (e *encoder) resultTail(r *Result) {
	e.u(uint64(len(r.Entries)))
	for _, de := range r.Entries {
		e.str(de.Name)
		e.u(de.Ino)
		e.u32(de.Mode)
	}
	e.u(uint64(len(r.Names)))
	for _, n := range r.Names {
		e.str(n)
	}
	e.u(r.StatFs.Capacity)
	e.u(r.StatFs.Used)
	e.u(r.StatFs.Inodes)
}

func (d *decoder) result(r *Result) {
	r.Errno = d.u32("errno")
	d.attr(&r.Attr)
	r.N = d.u("n")
	r.Data = d.bytes("data", MaxData)
	if n := d.count("entries", MaxEntries); n > 0 {
		r.Entries = make([]DirEntry, n)
		for i := range r.Entries {
			r.Entries[i].Name = d.str("entry.name", MaxName)
			r.Entries[i].Ino = d.u("entry.ino")
			r.Entries[i].Mode = d.u32("entry.mode")
		}
	}
	if n := d.count("names", MaxEntries); n > 0 {
		r.Names = make([]string, n)
		for i := range r.Names {
			r.Names[i] = d.str("xattr name", MaxName)
		}
	}
	r.StatFs.Capacity = d.u("capacity")
	r.StatFs.Used = d.u("used")
	r.StatFs.Inodes = d.u("inodes")
}

// EncodeEntry encodes a log entry.
func EncodeEntry(en *Entry) []byte {
	e := newEncoder(64 + opsSize(en.Ops))
	e.byte1(entryVersion)
	e.i(en.Time)
	e.u(uint64(len(en.Ops)))
	for i := range en.Ops {
		e.op(&en.Ops[i])
	}
	return e.b
}

// Entry versions. Version 2 adds each operation's fencing epoch; entries of
// version 1, written before fencing existed, still decode (epoch 0).
const (
	entryVersionFence = 2
	entryVersion      = entryVersionFence
)

// DecodeEntry decodes a log entry.
func DecodeEntry(b []byte) (Entry, error) {
	d := &decoder{b: b}
	var en Entry
	v := d.byte1("version")
	if d.err == nil && (v < 1 || v > entryVersion) {
		return en, fmt.Errorf("%w: entry version %d", ErrMalformed, v)
	}
	en.Time = d.i("time")
	if n := d.count("ops", MaxOps); n > 0 {
		en.Ops = make([]Op, n)
		for i := range en.Ops {
			d.opVersion(&en.Ops[i], v)
		}
	}
	return en, d.end()
}

func opsSize(ops []Op) int {
	n := 0
	for i := range ops {
		n += 64 + len(ops[i].Name) + len(ops[i].Name2) + len(ops[i].Data)
	}
	return n
}

func resultsSize(rs []Result) int {
	n := 0
	for i := range rs {
		n += 96 + len(rs[i].Data) + 24*len(rs[i].Entries)
		for _, de := range rs[i].Entries {
			n += len(de.Name)
		}
		for _, s := range rs[i].Names {
			n += len(s) + 2
		}
	}
	return n
}
