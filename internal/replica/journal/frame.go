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
	"golang.org/x/sys/unix"
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
func readFrameAt(f *os.File, off int64, hdr []byte, size int64, salt segSalt) (frameKind, uint64, int64, error) {
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
		if err := checkMarker(hdr, p[:], off, salt); err != nil {
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
	if salt.frameCRC(hdr[0:4], payload) != binary.BigEndian.Uint32(hdr[4:8]) {
		return 0, 0, 0, errors.New("frame checksum mismatch")
	}
	return entryFrame, binary.BigEndian.Uint64(payload[0:8]), frameHeader + int64(n), nil
}

func checkMarker(hdr, payload []byte, off int64, salt segSalt) error {
	if salt.frameCRC(hdr[0:4], payload) != binary.BigEndian.Uint32(hdr[4:8]) {
		return errors.New("batch marker checksum mismatch")
	}
	if at := binary.BigEndian.Uint64(payload) ^ uint64(salt); at != uint64(off) {
		return fmt.Errorf("batch marker records offset %d", at)
	}
	return nil
}

// encodeMarker appends the marker of a batch written at segment offset off.
// A salted segment records the offset XOR the salt, so a marker left at the
// same offset by a recycled segment's earlier life never checks out.
func encodeMarker(buf []byte, off int64, salt segSalt) []byte {
	start := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, batchFlag|markerPayload)
	buf = append(buf, 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint64(buf, uint64(off)^uint64(salt))
	crc := salt.frameCRC(buf[start:start+4], buf[start+frameHeader:])
	binary.BigEndian.PutUint32(buf[start+4:], crc)
	return buf
}

// laterBatch looks past a bad frame at off for a valid batch marker (at any
// byte position: the bad frame's length cannot be trusted to find the next
// frame) and returns its offset.
func laterBatch(f *os.File, off, size int64, salt segSalt) (int64, bool, error) {
	rest := make([]byte, size-off)
	if _, err := f.ReadAt(rest, off); err != nil && !errors.Is(err, io.EOF) {
		return 0, false, err
	}
	want := uint32(batchFlag | markerPayload)
	for p := 1; p+markerSize <= len(rest); p++ {
		if binary.BigEndian.Uint32(rest[p:]) != want {
			continue
		}
		if checkMarker(rest[p:p+frameHeader], rest[p+frameHeader:p+markerSize], off+int64(p), salt) == nil {
			return off + int64(p), true, nil
		}
	}
	return 0, false, nil
}

// batchVec is one append's bytes as a vector for pwritev: markers, frame
// headers and fixed fields in one small buffer, each entry's data written
// from the entry itself, so an append copies no payload before the kernel
// does (a 1 MiB entry was copied into a batch buffer on every replica).
type batchVec struct {
	small []byte   // sized up front, never grown: iov slices point into it
	iov   [][]byte // small pieces and entries' data, in file order
	mark  int      // start of the small piece not yet in iov
	size  int      // bytes in the batch
	salt  segSalt  // the segment's, for the checksums
}

// newBatchVec sizes the small buffer for a marker and the frames of logs.
func newBatchVec(logs []*raft.Log, salt segSalt) *batchVec {
	n := markerSize
	for _, lg := range logs {
		n += frameHeader + logFixedSize + 2*binary.MaxVarintLen64 + len(lg.Extensions)
	}
	return &batchVec{small: make([]byte, 0, n), iov: make([][]byte, 0, 2*len(logs)+1), salt: salt}
}

// marker appends the batch marker for segment offset off.
func (v *batchVec) marker(off int64) { v.small = encodeMarker(v.small, off, v.salt) }

// log appends one entry frame; the returned offset is the frame's within
// the batch.
func (v *batchVec) log(lg *raft.Log) int {
	at := v.size + len(v.small) - v.mark
	start := len(v.small)
	v.small = append(v.small, make([]byte, frameHeader)...)
	v.small = binary.BigEndian.AppendUint64(v.small, lg.Index)
	v.small = binary.BigEndian.AppendUint64(v.small, lg.Term)
	v.small = append(v.small, byte(lg.Type))
	v.small = binary.BigEndian.AppendUint64(v.small, uint64(lg.AppendedAt.UnixNano()))
	v.small = binary.AppendUvarint(v.small, uint64(len(lg.Data)))
	head := len(v.small)
	v.small = binary.AppendUvarint(v.small, uint64(len(lg.Extensions)))
	v.small = append(v.small, lg.Extensions...)
	n := len(v.small) - start - frameHeader + len(lg.Data)
	binary.BigEndian.PutUint32(v.small[start:], uint32(n))
	crc := crc32.Update(v.salt.seed(), castagnoli, v.small[start:start+4])
	crc = crc32.Update(crc, castagnoli, v.small[start+frameHeader:head])
	crc = crc32.Update(crc, castagnoli, lg.Data)
	crc = crc32.Update(crc, castagnoli, v.small[head:])
	binary.BigEndian.PutUint32(v.small[start+4:], crc)
	if len(lg.Data) > 0 {
		v.flushSmall(head)
		v.iov = append(v.iov, lg.Data)
		v.size += len(lg.Data)
	}
	return at
}

// flushSmall ends the current small piece at end.
func (v *batchVec) flushSmall(end int) {
	if end > v.mark {
		v.iov = append(v.iov, v.small[v.mark:end])
		v.size += end - v.mark
		v.mark = end
	}
}

// done returns the vector and its length in bytes.
func (v *batchVec) done() ([][]byte, int) {
	v.flushSmall(len(v.small))
	return v.iov, v.size
}

// pwriteAll writes iov at off, continuing after short writes.
func pwriteAll(f *os.File, iov [][]byte, off int64) error {
	fd := int(f.Fd())
	for len(iov) > 0 {
		n, err := unix.Pwritev(fd, iov[:min(len(iov), maxIovecs)], off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		off += int64(n)
		for n > 0 && len(iov) > 0 {
			if n < len(iov[0]) {
				iov[0] = iov[0][n:]
				n = 0
				break
			}
			n -= len(iov[0])
			iov = iov[1:]
		}
		for len(iov) > 0 && len(iov[0]) == 0 {
			iov = iov[1:]
		}
	}
	return nil
}

// maxIovecs is Linux's IOV_MAX: one pwritev takes at most this many.
const maxIovecs = 1024

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
