package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"

	"github.com/cellfleet/cellfleet/test/storagesim/api"
)

// A record on the log: magic, sequence, payload length, payload, and the
// CRC-32C of everything before it. A record whose checksum fails, or that
// ends past the end of the file, ends the valid log.
const (
	recordMagic  uint32 = 0x5353494d // "SSIM"
	headerLen           = 4 + 8 + 4
	trailerLen          = 4
	maxPayload          = 1 << 20
	logFileName         = "records.log"
	filesDirName        = "files"
)

// record is one record read back from the log.
type record struct {
	seq     uint64
	payload []byte
}

func encodeRecord(seq uint64, payload []byte) []byte {
	b := make([]byte, headerLen+len(payload)+trailerLen)
	binary.BigEndian.PutUint32(b[0:], recordMagic)
	binary.BigEndian.PutUint64(b[4:], seq)
	binary.BigEndian.PutUint32(b[12:], uint32(len(payload)))
	copy(b[headerLen:], payload)
	binary.BigEndian.PutUint32(b[headerLen+len(payload):], crc32.Checksum(b[:headerLen+len(payload)], api.Table))
	return b
}

// scanLog reads every valid record from the start of the log and returns
// them with the offset where the valid log ends. Anything past that offset
// is a torn tail (an append that was never acknowledged) or, if a valid
// record follows it, corruption: corrupt counts such records.
func scanLog(data []byte) (recs []record, end int64, corrupt int) {
	off := 0
	for {
		r, n, ok := decodeRecord(data[off:])
		if !ok {
			break
		}
		recs = append(recs, r)
		off += n
	}
	end = int64(off)
	// Past the first invalid byte, look for a further valid record: an
	// acknowledged record there means the data before it was damaged.
	for i := off + 1; i+headerLen+trailerLen <= len(data); i++ {
		if binary.BigEndian.Uint32(data[i:]) != recordMagic {
			continue
		}
		if _, _, ok := decodeRecord(data[i:]); ok {
			corrupt++
		}
	}
	return recs, end, corrupt
}

func decodeRecord(b []byte) (record, int, bool) {
	if len(b) < headerLen+trailerLen || binary.BigEndian.Uint32(b) != recordMagic {
		return record{}, 0, false
	}
	n := int(binary.BigEndian.Uint32(b[12:]))
	if n > maxPayload || len(b) < headerLen+n+trailerLen {
		return record{}, 0, false
	}
	if crc32.Checksum(b[:headerLen+n], api.Table) != binary.BigEndian.Uint32(b[headerLen+n:]) {
		return record{}, 0, false
	}
	return record{seq: binary.BigEndian.Uint64(b[4:]), payload: b[headerLen : headerLen+n]}, headerLen + n + trailerLen, true
}

// recordLog appends records at the end of the last acknowledged one. It
// writes at an explicit offset rather than O_APPEND: after a failed append
// (a partial write, an fsync error) the next append overwrites the
// unacknowledged bytes instead of burying them inside the log.
type recordLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
	end  int64 // end of the last acknowledged record
}

// openLog recovers the log at path: it truncates a torn tail and returns the
// records found (the highest sequence resumes numbering).
func openLog(path string) (*recordLog, []record, int64, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, 0, fmt.Errorf("read log %s: %w", path, err)
	}
	recs, end, _ := scanLog(data)
	truncated := int64(len(data)) - end
	l := &recordLog{path: path, end: end}
	if err := l.reopen(); err != nil {
		return nil, nil, 0, err
	}
	if truncated > 0 {
		if err := l.f.Truncate(end); err != nil {
			return nil, nil, 0, fmt.Errorf("truncate the torn tail of %s at %d: %w", path, end, err)
		}
	}
	return l, recs, truncated, nil
}

func (l *recordLog) reopen() error {
	if l.f != nil {
		l.f.Close()
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		l.f = nil
		return fmt.Errorf("open log %s: %w", l.path, err)
	}
	l.f = f
	return nil
}

// append writes one record and fsyncs it; nil means it is durable. After a
// failure the descriptor is reopened for the next append (a dead FUSE
// connection leaves the old one failing forever).
func (l *recordLog) append(seq uint64, payload []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		if err := l.reopen(); err != nil {
			return err
		}
	}
	b := encodeRecord(seq, payload)
	err := writeAllAt(l.f, b, l.end)
	if err == nil {
		err = l.f.Sync()
		if err != nil {
			err = fmt.Errorf("fsync log: %w", err)
		}
	}
	if err != nil {
		l.f.Close()
		l.f = nil
		return err
	}
	l.end += int64(len(b))
	return nil
}

func writeAllAt(f *os.File, b []byte, off int64) error {
	n, err := f.WriteAt(b, off)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("write %d bytes at %d: %w", len(b), off, err)
	}
	return nil
}
