package processtest

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/replica/journal"
)

// claimBytes is the backing claim docs/replica-engine.md states for a
// volume of capacity c with journal bound j and segment size seg: six
// capacities (tree, capture, checkpoint being written, two kept, restore
// staging) plus the journal, three segments written ahead of it (the first
// segment's zeros or a reused tail's old contents, two spares), and an
// eighth on top for the file system's own metadata (ext4: inode tables and
// its journal, 6.3% measured at this size).
func claimBytes(c, j, seg int64) int64 { return (6*c + j + 3*seg) * 9 / 8 }

// maxSampler records the largest value each probe returned while it runs.
type maxSampler struct {
	mu   sync.Mutex
	max  []int64
	stop chan struct{}
	done chan struct{}
}

func sampleMax(every time.Duration, probes ...func() int64) *maxSampler {
	s := &maxSampler{max: make([]int64, len(probes)), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			for i, p := range probes {
				v := p()
				s.mu.Lock()
				s.max[i] = max(s.max[i], v)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *maxSampler) finish() []int64 {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64{}, s.max...)
}

func TestVolumeRewritingTwentyTimesItsCapacityFitsTheStatedClaimAndJournalBound(t *testing.T) {
	const capacity = 64 << 20
	const journalBound = replica.DefaultJournalBytes
	claim := claimBytes(capacity, journalBound, harnessSegmentBytes)
	disks := []string{loopDisk(t, claim), loopDisk(t, claim), loopDisk(t, claim)}
	c := startCluster(t, clusterOpts{capacity: capacity, configure: func(i int, f *host.StandaloneFile) {
		f.Workers[0].DataDir = filepath.Join(disks[i], "data")
	}})
	cl := c.client(c.clientConfig())
	var probes []func() int64
	for i := range disks {
		dir := filepath.Join(c.dataDir(i), journal.JournalDir)
		probes = append(probes, func() int64 { return dirBytes(dir) })
	}
	for _, d := range disks {
		probes = append(probes, func() int64 {
			var st syscall.Statfs_t
			if syscall.Statfs(d, &st) != nil {
				return 0
			}
			return int64(st.Blocks-st.Bfree) * st.Bsize
		})
	}
	peaks := sampleMax(50*time.Millisecond, probes...)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const big = 32 << 20
	chunk := 1 << 20
	hot := createFile(t, cl, "hot")
	var written int64
	write := func(ino uint64, off int, data []byte) {
		t.Helper()
		if _, err := cl.Write(ctx, ino, uint64(off), data); err != nil {
			t.Fatalf("after %d MiB rewritten: write of %d bytes at %d: %v", written>>20, len(data), off, err)
		}
		written += int64(len(data))
	}
	round := 0
	for ; written < 20*capacity; round++ {
		fill := bytes.Repeat([]byte{byte('a' + round%26)}, chunk)
		for off := 0; off < big; off += chunk {
			write(hot, off, fill) // one file overwritten in place
		}
		var names []string
		for k := 0; k < 24; k++ { // many files created and deleted
			name := fmt.Sprintf("r%d-big%d", round, k)
			write(createFile(t, cl, name), 0, fill)
			names = append(names, name)
		}
		for k := 0; k < 64; k++ {
			name := fmt.Sprintf("r%d-small%d", round, k)
			write(createFile(t, cl, name), 0, fill[:4096])
			names = append(names, name)
		}
		for _, name := range names {
			if err := cl.Unlink(ctx, client.RootIno, name); err != nil {
				t.Fatalf("unlink %s: %v", name, err)
			}
		}
	}
	peak := peaks.finish()
	maxJournal, maxUsed := peak[:len(disks)], peak[len(disks):]
	t.Logf("rewrote %d MiB (%d rounds) of a %d MiB volume on %d MiB disks; per replica, largest journal %v bytes (bound %d), most disk in use %v bytes",
		written>>20, round, capacity>>20, claim>>20, maxJournal, journalBound, maxUsed)
	for i, n := range maxJournal {
		if n > journalBound {
			t.Errorf("replica r%d's journal reached %d bytes, past its bound of %d", i, n, journalBound)
		}
	}
	c.converged(time.Minute, 0, 1, 2)
	got, err := cl.Read(ctx, hot, big-4096, 4096)
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte('a' + (round-1)%26)}, 4096)) {
		t.Fatalf("the overwritten file's tail does not hold the last round's bytes: %v", err)
	}
}
