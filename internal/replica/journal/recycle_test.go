package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const recycleSeg = 64 << 10

// fillAndCompact writes 1 KiB entries from index 1 until the journal has
// rolled through at least six segments, then compacts away every segment
// but the last two, and returns the last index written.
func fillAndCompact(t *testing.T, l *Log) uint64 {
	t.Helper()
	next := uint64(1)
	for len(l.segs) < 6 {
		if err := l.StoreLogs(sizedEntries(next, 1000, 1000, 1000, 1000)); err != nil {
			t.Fatal(err)
		}
		next += 4
	}
	keep := l.segs[len(l.segs)-2].first
	if err := l.DeleteRange(1, keep-1); err != nil {
		t.Fatal(err)
	}
	return next - 1
}

// rollAndAppend appends batches of perBatch 1000-byte entries after last
// until the journal rolls into a new segment (a spare, when one is kept),
// then batches more of them into it, and returns the last index written.
func rollAndAppend(t *testing.T, l *Log, last uint64, perBatch, batches int) uint64 {
	t.Helper()
	sizes := make([]int, perBatch)
	for i := range sizes {
		sizes[i] = 1000
	}
	store := func() {
		if err := l.StoreLogs(sizedEntries(last+1, sizes...)); err != nil {
			t.Fatal(err)
		}
		last += uint64(perBatch)
	}
	for tail := l.segs[len(l.segs)-1]; tail == l.segs[len(l.segs)-1]; {
		store()
	}
	for range batches {
		store()
	}
	return last
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// expectSized wants the journal to hold exactly first to last, as written
// by sizedEntries with 1000-byte payloads.
func expectSized(t *testing.T, l *Log, first, last uint64) {
	t.Helper()
	expectData(t, l, first, last, func(i uint64) []byte { return payload(i, 1000) })
}

// A segment compaction removes is kept as a spare and renamed into the next
// segment, whose appends then overwrite the blocks of its earlier life.
// After a kill with the tail in such a segment, recovery must take what the
// earlier life left behind the last batch for a torn tail: those frames and
// batch markers checked out when they were written, and the salt of the new
// name is what makes them fail now. Without it (the unsalted format)
// recovery finds an earlier life's marker behind a "bad" frame and refuses
// the journal as damaged, which is what the second case shows.
func TestRecycledSegmentsHoldOnlyTheirOwnEntriesAfterAKill(t *testing.T) {
	for _, salted := range []bool{true, false} {
		t.Run(fmt.Sprintf("salted=%v", salted), func(t *testing.T) {
			if !salted {
				was := newSalt
				newSalt = func() (segSalt, error) { return 0, nil }
				t.Cleanup(func() { newSalt = was })
			}
			dir := t.TempDir()
			l, _ := openT(t, dir, recycleSeg)
			last := fillAndCompact(t, l)
			spares, _ := spareFiles(dir)
			if len(spares) != spareSegments {
				t.Fatalf("%d spares after compacting four segments, want %d", len(spares), spareSegments)
			}
			spareIno := inode(t, spares[len(spares)-1])
			first, _ := l.FirstIndex()
			// Roll into the spare, and write a few batches into it: far fewer
			// bytes than its earlier life held.
			last = rollAndAppend(t, l, last, 1, 3)
			if got := inode(t, lastSegment(t, dir)); got != spareIno {
				t.Fatalf("the new tail segment is inode %d, not the spare %d", got, spareIno)
			}
			if fi, _ := os.Stat(lastSegment(t, dir)); fi.Size() < recycleSeg {
				t.Fatalf("the reused segment is %d bytes: its earlier life's blocks should still be there", fi.Size())
			}
			abandon(l)

			l2, _, err := OpenLog(dir, recycleSeg)
			if !salted {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("an unsalted reused segment opened (err %v): the earlier life's markers should pass for acknowledged batches", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("reopening after a kill with the tail in a reused segment: %v", err)
			}
			t.Cleanup(func() { l2.Close() })
			expectSized(t, l2, first, last)
			if err := l2.StoreLogs(sizedEntries(last+1, 1000)); err != nil {
				t.Fatalf("appending after recovery: %v", err)
			}
			expectSized(t, l2, first, last+1)
		})
	}
}

// A batch torn in a reused segment is dropped like any torn tail, and a
// flipped byte in an acknowledged frame of it, with a batch after it, is
// still corruption.
func TestTornAndRottenFramesInARecycledSegment(t *testing.T) {
	setup := func(t *testing.T) (dir string, first, last uint64, torn, rotten int64) {
		dir = t.TempDir()
		l, _ := openT(t, dir, recycleSeg)
		last = fillAndCompact(t, l)
		first, _ = l.FirstIndex()
		last = rollAndAppend(t, l, last, 2, 3)
		rotten = frameOffset(t, l, last-3) + frameHeader + 10 // the batch before the last
		torn = frameOffset(t, l, last) + frameHeader + 10     // the last batch's second frame
		abandon(l)
		return dir, first, last, torn, rotten
	}
	t.Run("torn", func(t *testing.T) {
		dir, first, last, at, _ := setup(t)
		flipByte(t, lastSegment(t, dir), at)
		l, torn := openT(t, dir, recycleSeg)
		if torn == 0 {
			t.Fatal("the torn batch was not detected")
		}
		expectSized(t, l, first, last-1) // cut at the bad frame
	})
	t.Run("rotten", func(t *testing.T) {
		dir, _, _, _, at := setup(t)
		flipByte(t, lastSegment(t, dir), at)
		if _, torn, err := OpenLog(dir, recycleSeg); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a flipped byte in an acknowledged frame of a reused segment opened with %d torn bytes dropped (err %v); want ErrCorrupt", torn, err)
		}
	})
}

// A new journal's first segment is written with zeros before its first
// append, so appends overwrite written blocks and do not grow the file; a
// kill leaves the zeros after the last batch, and recovery cuts them off.
func TestFirstSegmentIsWrittenBeforeItsAppends(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, recycleSeg)
	if fi, _ := os.Stat(lastSegment(t, dir)); fi.Size() != recycleSeg {
		t.Fatalf("a new journal's first segment is %d bytes, want %d of zeros", fi.Size(), recycleSeg)
	}
	if err := l.StoreLogs(sizedEntries(1, 1000, 1000)); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(lastSegment(t, dir)); fi.Size() != recycleSeg {
		t.Fatalf("an append into the zeros changed the segment's size to %d", fi.Size())
	}
	abandon(l)
	l2, _ := openT(t, dir, recycleSeg)
	expectSized(t, l2, 1, 2)
	if err := l2.StoreLogs(sizedEntries(3, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	l3, torn := openT(t, dir, recycleSeg)
	if torn != 0 {
		t.Fatalf("a closed journal reported %d torn bytes", torn)
	}
	expectSized(t, l3, 1, 3)
}

// Segments named without a salt (journals written before salts) open, take
// appends, and the next segment they roll into is salted.
func TestUnsaltedSegmentsOpenAndRollIntoSaltedOnes(t *testing.T) {
	dir := t.TempDir()
	was := newSalt
	newSalt = func() (segSalt, error) { return 0, nil }
	l, _, err := OpenLog(dir, recycleSeg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(sizedEntries(1, 1000, 1000)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	newSalt = was
	if _, err := os.Stat(filepath.Join(dir, segName{seq: 1}.file())); err != nil {
		t.Fatalf("the unsalted segment: %v", err)
	}
	l2, _ := openT(t, dir, recycleSeg)
	last := uint64(2)
	for len(l2.segs) < 2 {
		if err := l2.StoreLogs(sizedEntries(last+1, 1000, 1000)); err != nil {
			t.Fatal(err)
		}
		last += 2
	}
	if l2.segs[0].name.salt != 0 || l2.segs[1].name.salt == 0 {
		t.Fatalf("salts %x, %x: want the old segment unsalted, the new one salted", l2.segs[0].name.salt, l2.segs[1].name.salt)
	}
	l2.Close()
	l3, _ := openT(t, dir, recycleSeg)
	expectSized(t, l3, 1, last)
}

// A new journal on a disk without room for its first segment's zeros still
// opens, with that segment empty, and takes appends as far as the disk
// allows.
func TestFirstSegmentOnAFullDiskStartsEmpty(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting a small tmpfs as the full disk needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	const seg = 1 << 20 // four times the disk
	l, _ := openT(t, dir, seg)
	fi, err := os.Stat(lastSegment(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 {
		t.Fatalf("the first segment on a full disk holds %d bytes; want it empty", fi.Size())
	}
	if err := l.StoreLogs(sizedEntries(1, 1000, 1000)); err != nil {
		t.Fatalf("appending where the zeros did not fit: %v", err)
	}
	l.Close()
	l2, _ := openT(t, dir, seg)
	expectSized(t, l2, 1, 2)
}
