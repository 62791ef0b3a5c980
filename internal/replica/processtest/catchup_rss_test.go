package processtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
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
// requests' worth of the largest a follower accepts (16 entries of at most
// 5 MiB, from a coordinator of the version before; this one sends 8): the
// decoded request, the entries its apply reads back, and the garbage
// collector's headroom.
const catchUpRSSBound = 64<<20 + 3*16*5<<20

// slowTreeRate paces a slowed backing tree's writes: 20 ms per 4 MiB
// entry, and 320 ms for each copy-on-write of the 64 MiB backing file
// (the follower made many in these runs), so its apply falls behind its
// journal.
const slowTreeRate = 200 << 20

func TestFollowerCatchingUpAfterALongAbsenceStaysUnderItsMemoryBound(t *testing.T) {
	away, rss := catchUpPeakRSS(t, nil)
	t.Logf("r%d caught up on 600 MiB of writes with a peak RSS of %d MiB (bound %d MiB)", away, rss>>20, catchUpRSSBound>>20)
	if rss > catchUpRSSBound {
		t.Fatalf("the catching-up follower's peak RSS was %d MiB, past the stated bound of %d MiB", rss>>20, catchUpRSSBound>>20)
	}
}

// A follower whose backing tree takes writes more slowly than its journal
// (a busy disk under the apply's buffered writes, the copies after a
// checkpoint) applies behind what it stores. raft queues up to 128 batches
// of committed entries for the state machine, so before the apply backlog
// bound such a follower kept what it received in memory: 685 and 740 MiB
// in this test. Now it holds the next request back until it has applied.
func TestFollowerWithASlowBackingTreeCatchesUpUnderItsMemoryBound(t *testing.T) {
	var st host.Status
	away, rss := catchUpPeakRSS(t, func(c *cluster, away int) {
		var err error
		if st, err = c.ReplicaStatus(away); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("r%d caught up on 600 MiB of writes through a slowed backing tree with a peak RSS of %d MiB (bound %d MiB), holding %d requests back",
		away, rss>>20, catchUpRSSBound>>20, st.ApplyBacklogWaits)
	if rss > catchUpRSSBound {
		t.Fatalf("the catching-up follower's peak RSS was %d MiB, past the stated bound of %d MiB", rss>>20, catchUpRSSBound>>20)
	}
	if st.ApplyBacklogWaits == 0 {
		t.Fatalf("r%d never held a request back for its apply: the slowed tree did not slow the apply, so this test checks nothing", away)
	}
}

// BenchmarkFollowerCatchUpPeakRSS reports the same catch-up's peak resident
// memory for make bench (the bound itself is the test above).
func BenchmarkFollowerCatchUpPeakRSS(b *testing.B) {
	for range b.N {
		_, rss := catchUpPeakRSS(b, nil)
		b.ReportMetric(float64(rss>>20), "peak-MiB")
		b.ReportMetric(float64(rss)/float64(catchUpRSSBound), "of-bound")
	}
}

// catchUpPeakRSS keeps one follower away while 600 MiB of 4 MiB writes
// commit, brings it back, and returns it and its peak RSS once all three
// converged. With slowed set, the follower's data directory is on a
// power-cut filesystem whose backing tree takes writes at slowTreeRate
// from the follower's return, and slowed runs once the three converged.
func catchUpPeakRSS(t testing.TB, slowed func(c *cluster, away int)) (int, int64) {
	// A journal bound above the backlog keeps the catch-up on entries: this
	// test bounds one catch-up request, not a checkpoint's transfer.
	opts := clusterOpts{configure: func(_ int, f *host.StandaloneFile) {
		f.Workers[0].Timing.JournalBytes = 2 << 30
	}}
	// Only the follower that goes away is on a power-cut filesystem (whose
	// server runs in this test's process, under -race when the test is):
	// it takes none of the 600 MiB written while it is away.
	const slowReplica = 2
	disks := newPowerDisks(3)
	if slowed != nil {
		opts.disk = func(t testing.TB, i int) string {
			if i == slowReplica {
				return disks.disk(t, i)
			}
			root := t.TempDir()
			for _, sub := range []string{"data", "state"} {
				if err := os.Mkdir(filepath.Join(root, sub), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			return root
		}
	}
	c := startCluster(t, opts)
	cl := c.client(c.clientConfig())
	leader := c.waitLeader(10 * time.Second)
	away := slices.IndexFunc([]int{0, 1, 2}, func(i int) bool { return i != leader })
	if slowed != nil {
		if away = slowReplica; leader == slowReplica {
			c.transfer(leader, 0)
			c.leaderAmong(10*time.Second, 0, 1)
		}
	}
	c.Kill(away)

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
	if slowed != nil {
		disks.fs[away].SlowWrites(filepath.Join("data", "store", "chunks"), slowTreeRate)
	}
	c.Restart(away)
	c.converged(5*time.Minute, 0, 1, 2)
	rss, err := peakRSS(c.Pid(away))
	if err != nil {
		t.Fatal(err)
	}
	if slowed != nil {
		slowed(c, away)
	}
	return away, rss

}
