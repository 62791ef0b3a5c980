package processtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// peakRSS reads a process's resident-set high-water mark (VmHWM).
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// catchUpRSSBound is the stated bound on a catching-up follower's resident
// memory (docs/replica-engine.md): the process's own 64 MiB plus three
// catch-up requests' worth (16 entries of at most 5 MiB: the decoded
// request, its journal frames, and the garbage collector's headroom).
const catchUpRSSBound = 64<<20 + 3*16*5<<20

func TestFollowerCatchingUpAfterALongAbsenceStaysUnderItsMemoryBound(t *testing.T) {
	away, rss := catchUpPeakRSS(t)
	t.Logf("r%d caught up on 600 MiB of writes with a peak RSS of %d MiB (bound %d MiB)", away, rss>>20, catchUpRSSBound>>20)
	if rss > catchUpRSSBound {
		t.Fatalf("the catching-up follower's peak RSS was %d MiB, past the stated bound of %d MiB", rss>>20, catchUpRSSBound>>20)
	}
}

// BenchmarkFollowerCatchUpPeakRSS reports the same catch-up's peak resident
// memory for make bench (the bound itself is the test above).
func BenchmarkFollowerCatchUpPeakRSS(b *testing.B) {
	for range b.N {
		_, rss := catchUpPeakRSS(b)
		b.ReportMetric(float64(rss>>20), "peak-MiB")
		b.ReportMetric(float64(rss)/float64(catchUpRSSBound), "of-bound")
	}
}

// catchUpPeakRSS keeps one follower away while 600 MiB of 4 MiB writes
// commit, brings it back, and returns it and its peak RSS once all three
// converged.
func catchUpPeakRSS(t testing.TB) (int, int64) {
	// A journal bound above the backlog keeps the catch-up on entries: this
	// test bounds one catch-up request, not a checkpoint's transfer.
	c := startCluster(t, clusterOpts{configure: func(_ int, f *host.StandaloneFile) {
		f.Workers[0].Timing.JournalBytes = 2 << 30
	}})
	cl := c.client(c.clientConfig())
	leader := c.waitLeader(10 * time.Second)
	away := slices.IndexFunc([]int{0, 1, 2}, func(i int) bool { return i != leader })
	c.kill(away)

	// 600 MiB of 4 MiB writes while it is away: more than one catch-up
	// request of raft's default 256 entries could carry in a 768 MiB host.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ino := createFile(t, cl, "big")
	const region = 64 << 20
	chunk := 4 << 20
	for k := 0; k < 150; k++ {
		data := bytes.Repeat([]byte{byte(k)}, chunk)
		if _, err := cl.Write(ctx, ino, uint64(k*chunk%region), data); err != nil {
			t.Fatalf("write %d while r%d is away: %v", k, away, err)
		}
	}
	c.start(away)
	c.converged(5*time.Minute, 0, 1, 2)
	rss, err := peakRSS(c.procs[away].Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return away, rss

}
