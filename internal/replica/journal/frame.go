package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"github.com/hashicorp/raft"
)

// Batch markers. Every append (one raft batch, one fdatasync) begins with a
// marker frame: its length word has batchFlag set (an entry frame's length
// is below maxPayload, so journals written before markers read unchanged)
// and its payload is the marker's own byte offset in the segment. A batch is
// written only after the previous one's fdatasync returned, so a valid
// marker anywhere past a bad frame proves the bad frame was durable and
// acknowledged: bit rot, not a torn tail. The recorded offset keeps entry
// data that happens to contain marker-like bytes from passing for one
// except at the exact position it names.
const (
	batchFlag     = 1 << 31
	markerPayload = 8
	markerSize    = frameHeader + markerPayload
)

// frameKind tells an entry frame from a batch marker.
type frameKind int

const (
	entryFrame frameKind = iota
	markerFrame
)

// readFrameAt verifies one frame and returns its kind, index (entries) and
// length.
func readFrameAt(f *os.File, off int64, hdr []byte, size int64) (frameKind, uint64, int64, error) {
	if size-off < frameHeader {
		return 0, 0, 0, errors.New("short frame header")
	}
	if _, err := f.ReadAt(hdr, off); err != nil {
		return 0, 0, 0, err
	}
	n := binary.BigEndian.Uint32(hdr[0:4])
	if n&batchFlag != 0 {
		if n&^batchFlag != markerPayload || size-off < markerSize {
			return 0, 0, 0, fmt.Errorf("batch marker length %d invalid", n&^batchFlag)
		}
		var p [markerPayload]byte
		if _, err := f.ReadAt(p[:], off+frameHeader); err != nil {
			return 0, 0, 0, err
		}
		if err := checkMarker(hdr, p[:], off); err != nil {
			return 0, 0, 0, err
		}
		return markerFrame, 0, markerSize, nil
	}
	if n < logFixedSize || n > maxPayload || int64(n) > size-off-frameHeader {
		return 0, 0, 0, fmt.Errorf("frame length %d invalid", n)
	}
	payload := make([]byte, n)
	if _, err := f.ReadAt(payload, off+frameHeader); err != nil {
		return 0, 0, 0, err
	}
	if crc32.Update(crc32.Checksum(hdr[0:4], castagnoli), castagnoli, payload) != binary.BigEndian.Uint32(hdr[4:8]) {
		return 0, 0, 0, errors.New("frame checksum mismatch")
	}
	return entryFrame, binary.BigEndian.Uint64(payload[0:8]), frameHeader + int64(n), nil
}

func checkMarker(hdr, payload []byte, off int64) error {
	if crc32.Update(crc32.Checksum(hdr[0:4], castagnoli), castagnoli, payload) != binary.BigEndian.Uint32(hdr[4:8]) {
		return errors.New("batch marker checksum mismatch")
	}
	if at := binary.BigEndian.Uint64(payload); at != uint64(off) {
		return fmt.Errorf("batch marker records offset %d", at)
	}
	return nil
}

// encodeMarker appends the marker of a batch written at segment offset off.
func encodeMarker(buf []byte, off int64) []byte {
	start := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, batchFlag|markerPayload)
	buf = append(buf, 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint64(buf, uint64(off))
	crc := crc32.Update(crc32.Checksum(buf[start:start+4], castagnoli), castagnoli, buf[start+frameHeader:])
	binary.BigEndian.PutUint32(buf[start+4:], crc)
	return buf
}

// laterBatch looks past a bad frame at off for a valid batch marker (at any
// byte position: the bad frame's length cannot be trusted to find the next
// frame) and returns its offset.
func laterBatch(f *os.File, off, size int64) (int64, bool, error) {
	rest := make([]byte, size-off)
	if _, err := f.ReadAt(rest, off); err != nil && !errors.Is(err, io.EOF) {
		return 0, false, err
	}
	want := uint32(batchFlag | markerPayload)
	for p := 1; p+markerSize <= len(rest); p++ {
		if binary.BigEndian.Uint32(rest[p:]) != want {
			continue
		}
		if checkMarker(rest[p:p+frameHeader], rest[p+frameHeader:p+markerSize], off+int64(p)) == nil {
			return off + int64(p), true, nil
		}
	}
	return 0, false, nil
}

func encodeLog(buf []byte, lg *raft.Log) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, frameHeader)...)
	buf = binary.BigEndian.AppendUint64(buf, lg.Index)
	buf = binary.BigEndian.AppendUint64(buf, lg.Term)
	buf = append(buf, byte(lg.Type))
	buf = binary.BigEndian.AppendUint64(buf, uint64(lg.AppendedAt.UnixNano()))
	buf = binary.AppendUvarint(buf, uint64(len(lg.Data)))
	buf = append(buf, lg.Data...)
	buf = binary.AppendUvarint(buf, uint64(len(lg.Extensions)))
	buf = append(buf, lg.Extensions...)
	n := len(buf) - start - frameHeader
	binary.BigEndian.PutUint32(buf[start:], uint32(n))
	crc := crc32.Update(crc32.Checksum(buf[start:start+4], castagnoli), castagnoli, buf[start+frameHeader:])
	binary.BigEndian.PutUint32(buf[start+4:], crc)
	return buf
}

func decodeLog(p []byte, lg *raft.Log) error {
	if len(p) < logFixedSize {
		return fmt.Errorf("%w: short record", ErrCorrupt)
	}
	lg.Index = binary.BigEndian.Uint64(p[0:8])
	lg.Term = binary.BigEndian.Uint64(p[8:16])
	lg.Type = raft.LogType(p[16])
	lg.AppendedAt = time.Unix(0, int64(binary.BigEndian.Uint64(p[17:25])))
	p = p[25:]
	field := func() ([]byte, error) {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return nil, fmt.Errorf("%w: bad field length", ErrCorrupt)
		}
		v := p[k : k+int(n)]
		p = p[k+int(n):]
		if len(v) == 0 {
			return nil, nil
		}
		return v, nil
	}
	var err error
	if lg.Data, err = field(); err != nil {
		return err
	}
	lg.Extensions, err = field()
	return err
}
