package main

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

const recordSize = 4096

// record is the deterministic content of a record: a header naming what it
// is (so a checker can say which version it found) and a filler derived
// from it (so a torn or foreign page is told apart from a right one).
func record(size int, kind string, a, b int, ver uint64) []byte {
	buf := make([]byte, size)
	hdr := fmt.Appendf(nil, "%s %d %d v%d\n", kind, a, b, ver)
	copy(buf, hdr)
	h := fnv.New64a()
	h.Write(hdr)
	x := h.Sum64() | 1
	for i := len(hdr) &^ 7; i+8 <= size; i += 8 {
		if i < len(hdr) {
			continue
		}
		// xorshift: cheap and different on every page.
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(buf[i:], x)
	}
	return buf
}

func appendRecord(w, slot int) []byte { return record(recordSize, "append", w, slot, 0) }

func overwriteRecord(slot int, ver uint64) []byte {
	return record(recordSize, "overwrite", 0, slot, ver)
}

// parseHeader reads the version a record says it holds.
func parseHeader(b []byte) (kind string, a, c int, ver uint64, ok bool) {
	n, err := fmt.Sscanf(string(b[:min(len(b), 96)]), "%s %d %d v%d\n", &kind, &a, &c, &ver)
	return kind, a, c, ver, err == nil && n == 4
}

func fileContent(name string, size int, ver uint64) []byte {
	h := fnv.New32a()
	h.Write([]byte(name))
	return record(size, name, int(h.Sum32()&0xffff), size, ver)
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
