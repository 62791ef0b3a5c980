package journal

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// frameOffset is the byte offset of entry index in the tail segment.
func frameOffset(t *testing.T, l *Log, index uint64) int64 {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.segs[len(l.segs)-1]
	if index < s.first || index > s.last() {
		t.Fatalf("entry %d is not in the tail segment [%d, %d]", index, s.first, s.last())
	}
	return int64(s.offsets[index-s.first])
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	b := make([]byte, 1)
	if _, err := fh.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := fh.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A bad frame in the last segment that a later batch follows was
// acknowledged: batches are written one after another, each only once the
// one before it was fdatasync'd. It is bit rot, reported as corruption, not
// a torn tail to drop (with every acknowledged entry after it).
func TestBitRotInAnAcknowledgedFrameOfTheLastSegmentIsCorruption(t *testing.T) {
	for name, at := range map[string]func(frame int64) int64{
		"payload": func(frame int64) int64 { return frame + frameHeader + 3 },
		"length":  func(frame int64) int64 { return frame + 1 }, // the frames after it can no longer be found by walking
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l, _ := openT(t, dir, 1<<20)
			for i := uint64(1); i <= 30; i += 10 {
				if err := l.StoreLogs(entries(i, i+9)); err != nil {
					t.Fatal(err)
				}
			}
			off := frameOffset(t, l, 15) // in the middle batch
			l.Close()
			flipByte(t, lastSegment(t, dir), at(off))
			if _, torn, err := OpenLog(dir, 1<<20); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a flipped byte in acknowledged entry 15, followed by a later batch, opened with %d torn bytes dropped (err %v); want ErrCorrupt", torn, err)
			}
		})
	}
}

// A batch torn by a crash can leave good frames behind a bad one (the
// sectors persisted out of order). No later batch follows it, so it is a
// torn tail: truncated at the bad frame, the journal reopens.
func TestTornBatchWithGoodFramesBehindABadOneIsATornTail(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, 1<<20)
	if err := l.StoreLogs(entries(1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(entries(11, 20)); err != nil {
		t.Fatal(err)
	}
	off := frameOffset(t, l, 13)
	l.Close()
	flipByte(t, lastSegment(t, dir), off+frameHeader+2)
	l2, torn := openT(t, dir, 1<<20)
	if torn == 0 {
		t.Fatal("the torn batch was not detected")
	}
	expectRange(t, l2, 1, 12)
	if err := l2.StoreLogs(entries(13, 13)); err != nil {
		t.Fatalf("appending after recovery: %v", err)
	}
}

// Journals written before batch markers (frames only) still open, and take
// appends; their frames carry no marker, so a bad frame in their last
// segment is treated as a torn tail, as it was.
func TestJournalWithoutBatchMarkersStillOpens(t *testing.T) {
	dir := t.TempDir()
	logs := entries(1, 20)
	vec := newBatchVec(logs, 0)
	for _, lg := range logs {
		vec.log(lg)
	}
	iov, _ := vec.done()
	buf := bytes.Join(iov, nil)
	if err := os.WriteFile(filepathSeg(dir, 1), buf, 0o600); err != nil {
		t.Fatal(err)
	}
	l, torn := openT(t, dir, 1<<20)
	if torn != 0 {
		t.Fatalf("an intact journal without markers reported %d torn bytes", torn)
	}
	expectRange(t, l, 1, 20)
	if err := l.StoreLogs(entries(21, 25)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, _ = openT(t, dir, 1<<20)
	expectRange(t, l, 1, 25)
}

func filepathSeg(dir string, seq uint64) string {
	return (&Log{dir: dir}).segPath(segName{seq: seq})
}
