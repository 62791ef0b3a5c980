package journal

import (
	"fmt"
	"os"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/directio"
)

// sizedEntries returns entries whose payloads have the given sizes and
// contents derived from their index, so a misplaced byte shows.
func sizedEntries(from uint64, sizes ...int) []*raft.Log {
	out := make([]*raft.Log, len(sizes))
	for i, n := range sizes {
		out[i] = &raft.Log{Index: from + uint64(i), Term: 1, Type: raft.LogCommand, Data: payload(from+uint64(i), n)}
	}
	return out
}

func payload(index uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(index*31 + uint64(i)*7 + uint64(i>>12))
	}
	return b
}

// abandon closes l's descriptors as a kill -9 would: nothing is cut or synced.
func abandon(l *Log) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for _, s := range l.segs {
		s.close()
	}
}

func setDirectIO(t *testing.T, on bool) {
	t.Helper()
	was := directIO
	directIO = on
	t.Cleanup(func() { directIO = was })
}

// TestAppendsOfEverySizeReadBackAfterAKillAndATruncation covers both append
// paths: batches of sizes that end anywhere in a block, an entry larger than
// the O_DIRECT chunk, segment rolls, a reopen without Close (the padding an
// O_DIRECT append leaves is neither a torn tail nor corruption), a suffix
// truncation and appends after it.
func TestAppendsOfEverySizeReadBackAfterAKillAndATruncation(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			setDirectIO(t, direct)
			dir := t.TempDir()
			l, _ := openT(t, dir, 256<<10)
			if direct && l.segs[0].direct == nil {
				// CI's temporary directory is on ext4, which takes O_DIRECT: there
				// this path must run.
				if os.Getenv("CI") != "" {
					t.Fatalf("CI must run the O_DIRECT appends, but the filesystem of %s refuses O_DIRECT", dir)
				}
				t.Skipf("the filesystem of %s refuses O_DIRECT; the buffered case covers it", dir)
			}
			if !direct && l.segs[0].direct != nil {
				t.Fatal("directIO off, yet the segment has an O_DIRECT descriptor")
			}
			batches := [][]int{{1}, {4000}, {4097, 3}, {1<<20 + 5000}, {100, 200, 300}, {8192}, {70000, 1, 70000}, {12}, {300000}, {5}}
			sizes := map[uint64]int{}
			next := uint64(1)
			for _, b := range batches {
				if err := l.StoreLogs(sizedEntries(next, b...)); err != nil {
					t.Fatal(err)
				}
				for _, n := range b {
					sizes[next] = n
					next++
				}
			}
			last := next - 1
			if len(l.segs) < 3 {
				t.Fatalf("%d segments: the test wants rolls", len(l.segs))
			}
			for i, s := range l.segs {
				fi, err := s.f.Stat()
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case i < len(l.segs)-1 && fi.Size() != s.size:
					t.Fatalf("segment %d (not the tail) is %d bytes on disk, its frames end at %d", s.name.seq, fi.Size(), s.size)
				case i == len(l.segs)-1 && direct && (fi.Size()%directio.Block != 0 || fi.Size() < s.size || fi.Size()-s.size >= directio.Block):
					t.Fatalf("tail segment %d is %d bytes on disk, its frames end at %d: want block-aligned padding", s.name.seq, fi.Size(), s.size)
				}
			}
			check := func(l *Log, first, last uint64) {
				t.Helper()
				expectData(t, l, first, last, func(i uint64) []byte { return payload(i, sizes[i]) })
			}
			check(l, 1, last)

			abandon(l)
			l2, torn := openT(t, dir, 256<<10)
			if torn != 0 {
				t.Fatalf("a journal killed after its appends returned reported %d torn bytes", torn)
			}
			check(l2, 1, last)

			// A suffix truncation inside the tail segment, then appends that
			// start in the block it left partly written.
			cut := last - 1
			if err := l2.DeleteRange(cut, last); err != nil {
				t.Fatal(err)
			}
			more := []int{3000, 9, directio.Block}
			if err := l2.StoreLogs(sizedEntries(cut, more...)); err != nil {
				t.Fatal(err)
			}
			for i, n := range more {
				sizes[cut+uint64(i)] = n
			}
			last = cut + uint64(len(more)) - 1
			check(l2, 1, last)
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
			tail := l2.segs[len(l2.segs)-1]
			if fi, err := os.Stat(l2.segPath(tail.name)); err != nil || fi.Size() != tail.size {
				t.Fatalf("after Close the tail segment is %v bytes (%v), its frames end at %d", fi.Size(), err, tail.size)
			}
			l3, torn := openT(t, dir, 256<<10)
			if torn != 0 {
				t.Fatalf("a closed journal reported %d torn bytes", torn)
			}
			check(l3, 1, last)
		})
	}
}

// TestZerosThatAreNotPaddingAreATornTail: zeros from the last frame to a
// block boundary are padding; a longer run of zeros (a batch whose blocks
// never reached the disk whole) is still a torn tail, reported as such.
func TestZerosThatAreNotPaddingAreATornTail(t *testing.T) {
	setDirectIO(t, false)
	dir := t.TempDir()
	l, _ := openT(t, dir, 1<<20)
	if err := l.StoreLogs(entries(1, 3)); err != nil {
		t.Fatal(err)
	}
	end := l.segs[0].size
	l.Close()
	f, err := os.OpenFile(lastSegment(t, dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Zeros past the next block boundary: more than padding.
	if err := f.Truncate(end + directio.Block + 10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l2, torn := openT(t, dir, 1<<20)
	if torn != directio.Block+10 {
		t.Fatalf("torn bytes %d, want %d", torn, directio.Block+10)
	}
	expectRange(t, l2, 1, 3)
}
