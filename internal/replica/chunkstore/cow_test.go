package chunkstore

import (
	"bytes"
	"os"
	"syscall"
	"testing"
)

func TestWritesAfterACaptureLeaveWhatTheCaptureReads(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	before := fill(3*testChunk, 1)
	write(t, s, 7, before, 0)
	c := s.Capture(10)
	defer c.Release()

	write(t, s, 7, fill(100, 2), testChunk+5)              // inside a chunk
	write(t, s, 7, fill(testChunk, 3), 2*testChunk)        // a whole chunk
	write(t, s, 7, fill(2*testChunk, 4), 3*testChunk-1000) // across the end
	if err := s.Truncate(7, testChunk/2); err != nil {     // cuts the first
		t.Fatal(err)
	}
	if err := s.Punch(7, 10, 20); err != nil {
		t.Fatal(err)
	}

	got := make([]byte, len(before))
	if err := c.ReadAt(7, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, before) {
		t.Fatal("a write after the capture changed what the capture reads")
	}
	live := read(t, s, 7, 0, testChunk)
	want := append(before[:testChunk/2:testChunk/2], make([]byte, testChunk/2)...)
	clear(want[10:30])
	if !bytes.Equal(live, want) {
		t.Fatal("the live file does not hold the writes made after the capture")
	}
}

func TestWholeChunkWriteAfterACaptureCopiesNothing(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	write(t, s, 3, fill(2*testChunk, 1), 0)
	c := s.Capture(1)
	defer c.Release()
	old := inodeOf(t, s, 3, 0)

	write(t, s, 3, fill(testChunk, 9), 0)
	if st := s.Stats(); st.Copied+st.Cloned != 0 {
		t.Fatalf("a write covering the whole chunk copied it (%+v)", st)
	}
	if inodeOf(t, s, 3, 0) == old {
		t.Fatal("a sealed chunk was written in place")
	}

	write(t, s, 3, fill(10, 9), testChunk+100)
	if st := s.Stats(); st.Copied+st.Cloned != 1 {
		t.Fatalf("a small write to a sealed chunk made %d copies, want 1", st.Copied+st.Cloned)
	}
	write(t, s, 3, fill(10, 9), testChunk+200)
	if st := s.Stats(); st.Copied+st.Cloned != 1 {
		t.Fatal("a second write to a chunk already copied since the capture copied it again")
	}
}

func TestWritesInPlaceOnceTheCaptureIsReleased(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	write(t, s, 3, fill(testChunk, 1), 0)
	s.Capture(1).Release()
	old := inodeOf(t, s, 3, 0)
	write(t, s, 3, fill(10, 2), 5)
	if st := s.Stats(); st.Copied+st.Cloned != 0 || inodeOf(t, s, 3, 0) != old {
		t.Fatal("a chunk no capture or manifest holds was copied on write")
	}
}

func TestRemovingAFileNothingHoldsRemovesItsChunksAtOnce(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	write(t, s, 5, fill(3*testChunk, 1), 0)
	if err := s.Remove(5); err != nil {
		t.Fatal(err)
	}
	if files := chunkFiles(t, dir); len(files) != 0 {
		t.Fatalf("chunks of a removed file left: %v", files)
	}
	if _, err := os.Stat(s.inoDir(5)); !os.IsNotExist(err) {
		t.Fatalf("directory of a removed file left: %v", err)
	}
}

// inodeOf returns the disk inode of the live chunk idx of file ino.
func inodeOf(t *testing.T, s *Store, ino, idx uint64) uint64 {
	t.Helper()
	s.mu.RLock()
	ref := s.files[ino].get(idx)
	s.mu.RUnlock()
	var st syscall.Stat_t
	if err := syscall.Stat(s.chunkPath(chunkKey{ino, idx, ref.ver}), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestCaptureCostDoesNotGrowWithTheChunks(t *testing.T) {
	allocs := func(chunks int) float64 {
		s := open(t, t.TempDir(), Options{})
		for i := range chunks {
			write(t, s, 1, []byte{1}, uint64(i)*testChunk) // one byte per chunk: cheap on disk
		}
		return testing.AllocsPerRun(20, func() { s.Capture(1).Release() })
	}
	if few, many := allocs(2), allocs(2*pageLen+3); many != few {
		t.Fatalf("a capture of 1027 chunks allocates %v times, of 2 chunks %v: it must cost O(files)", many, few)
	}
}
