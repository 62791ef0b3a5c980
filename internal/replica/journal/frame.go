package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"time"

	"github.com/hashicorp/raft"
)

// readFrameAt verifies one frame and returns its index and length.
func readFrameAt(f *os.File, off int64, hdr []byte, size int64) (uint64, int64, error) {
	if size-off < frameHeader {
		return 0, 0, errors.New("short frame header")
	}
	if _, err := f.ReadAt(hdr, off); err != nil {
		return 0, 0, err
	}
	n := binary.BigEndian.Uint32(hdr[0:4])
	if n < logFixedSize || n > maxPayload || int64(n) > size-off-frameHeader {
		return 0, 0, fmt.Errorf("frame length %d invalid", n)
	}
	payload := make([]byte, n)
	if _, err := f.ReadAt(payload, off+frameHeader); err != nil {
		return 0, 0, err
	}
	if crc32.Update(crc32.Checksum(hdr[0:4], castagnoli), castagnoli, payload) != binary.BigEndian.Uint32(hdr[4:8]) {
		return 0, 0, errors.New("frame checksum mismatch")
	}
	return binary.BigEndian.Uint64(payload[0:8]), frameHeader + int64(n), nil
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
