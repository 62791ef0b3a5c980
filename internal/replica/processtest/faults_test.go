package processtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

// leaderAmong waits until one of the given replicas reports Leader.
func (c *cluster) leaderAmong(timeout time.Duration, replicas ...int) int {
	c.t.Helper()
	leader := -1
	poll.Until(c.t, timeout, fmt.Sprintf("one of %v becomes coordinator", replicas), func() error {
		for _, i := range replicas {
			if st, err := c.ReplicaStatus(i); err == nil && st.RaftState == "Leader" {
				leader = i
				return nil
			}
		}
		return errors.New("none reports Leader")
	})
	return leader
}

// TestPartitionedCoordinatorStopsAcknowledgingAndNothingDiverges: the
// coordinator is cut off from both followers and written to at once, while
// it still holds its lease and reports Leader (a write sent only after it
// stepped down would be refused by any replica and prove nothing). Each of
// those writes is either not acknowledged, or acknowledged and then in the
// file exactly once after the partition heals; the new coordinator's
// writes are all there, and the three replicas converge.
func TestPartitionedCoordinatorStopsAcknowledgingAndNothingDiverges(t *testing.T) {
	c := startCluster(t, clusterOpts{proxied: true})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 50)
	old := c.waitLeader(10 * time.Second)
	pinnedCfg := c.clientConfig()
	pinnedCfg.Endpoints = []client.Endpoint{pinnedCfg.Endpoints[old]}
	pinnedCfg.RetryBudget = 2 * time.Second
	pinned := c.client(pinnedCfg)
	// The pinned client's connection is made before the cut, so the first
	// write leaves at once.
	if _, err := pinned.StatFs(context.Background()); err != nil {
		t.Fatal(err)
	}

	const leaseWrites = 8 // records 900.. sent to the old coordinator during its lease
	acked := make([]bool, leaseWrites)
	var wg sync.WaitGroup
	before, err := c.ReplicaStatus(old)
	if err != nil {
		t.Fatal(err)
	}
	c.isolate(old, true)
	for k := range leaseWrites {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := pinned.Append(context.Background(), ino, record(900+k))
			acked[k] = err == nil
		}()
	}
	// The writes reached it while it coordinated: only a leader appends
	// entries to its own log, and cut off it receives none from anyone.
	poll.Until(t, 3*time.Second, "the isolated coordinator appends the writes sent during its lease", func() error {
		st, err := c.ReplicaStatus(old)
		if err != nil {
			return err
		}
		if st.LastIndex <= before.LastIndex {
			return fmt.Errorf("last index %d, %d before the cut (now %s)", st.LastIndex, before.LastIndex, st.RaftState)
		}
		return nil
	})
	// Allow a few leases for a loaded machine and the status poll.
	poll.Until(t, 3*time.Second, "the isolated coordinator steps down within a few leases", func() error {
		st, err := c.ReplicaStatus(old)
		if err != nil {
			return err
		}
		if st.RaftState == "Leader" {
			return errors.New("still reports Leader")
		}
		return nil
	})
	others := slices.DeleteFunc([]int{0, 1, 2}, func(i int) bool { return i == old })
	c.leaderAmong(10*time.Second, others...)
	wg.Wait()
	if _, _, err := pinned.Append(context.Background(), ino, record(999)); err == nil {
		t.Fatalf("the isolated old coordinator acknowledged a write after it stepped down")
	}
	appendRecords(t, cl, ino, 50, 80) // served by the new coordinator

	c.isolate(old, false)
	c.converged(30*time.Second, 0, 1, 2)
	got := readAll(t, cl, ino)
	expectPrefix(t, got, 50)
	count := map[string]int{}
	for _, line := range bytes.SplitAfter(got, []byte("\n")) {
		if len(line) > 0 {
			count[string(line)]++
		}
	}
	for k := 50; k < 80; k++ {
		if count[string(record(k))] != 1 {
			t.Errorf("record %d acknowledged by the new coordinator is in the file %d times, want once", k, count[string(record(k))])
		}
	}
	n := 0
	for k, ok := range acked {
		if !ok {
			continue
		}
		n++
		if count[string(record(900+k))] != 1 {
			t.Errorf("record %d acknowledged by the partitioned coordinator during its lease is in the file %d times, want once",
				900+k, count[string(record(900+k))])
		}
	}
	for line, times := range count {
		if times > 1 {
			t.Errorf("%q is in the file %d times", line, times)
		}
	}
	t.Logf("%d of %d writes sent during the lease were acknowledged; the file holds %d records", n, leaseWrites, len(count))
}

func expectPrefix(t *testing.T, got []byte, n int) {
	t.Helper()
	for k := 0; k < n; k++ {
		r := record(k)
		off := k * len(r)
		if off+len(r) > len(got) || string(got[off:off+len(r)]) != string(r) {
			t.Fatalf("acknowledged record %d is missing or altered", k)
		}
	}
}

func TestQuorumLossFailsWritesClearlyAndLosesNothingAfterReturn(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	cfg := c.clientConfig()
	cfg.RetryBudget = 3 * time.Second
	cfg.AttemptTimeout = time.Second
	cl := c.client(cfg)
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 30)
	leader := c.waitLeader(10 * time.Second)
	follower := (leader + 1) % 3
	c.Kill(leader)
	c.Kill(follower)

	start := time.Now()
	_, _, err := cl.Append(context.Background(), ino, record(30))
	elapsed := time.Since(start)
	if err == nil {
		t.Fatalf("a write was acknowledged with two of three replicas down")
	}
	if !errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrUncertain) {
		t.Fatalf("quorum loss must surface as unavailable or uncertain, got %v", err)
	}
	if bound := cfg.RetryBudget + 2*time.Second; elapsed > bound {
		t.Fatalf("the write failed after %s, beyond the bound %s", elapsed, bound)
	}
	t.Logf("write failed after %s with: %v", elapsed, err)

	c.Restart(leader)
	c.Restart(follower)
	c.waitLeader(20 * time.Second)
	got := readAll(t, cl, ino)
	expectPrefix(t, got, 30)
	if n := len(got) / len(record(0)); n != 30 && n != 31 {
		t.Fatalf("file holds %d records, want the 30 acknowledged (plus at most the uncertain one)", n)
	}
	appendRecords(t, cl, ino, 100, 110)
	c.converged(30*time.Second, 0, 1, 2)
}

func TestWipedFollowerIsRebuiltByTheGroupWithinTheRebuildLimit(t *testing.T) {
	timing := proccluster.FastTiming
	timing.SnapshotThreshold, timing.TrailingLogs = 32, 8
	c := startCluster(t, clusterOpts{timing: timing, hostArgs: []string{"-rebuild-bandwidth-mib", "1"}})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	chunk := make([]byte, 64<<10)
	for k := 0; k < 40; k++ { // 2.5 MiB
		for i := range chunk {
			chunk[i] = byte(k + i)
		}
		if _, _, err := cl.Append(context.Background(), ino, chunk); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.waitLeader(10 * time.Second)
	c.Checkpoint(t, leader)
	victim := (leader + 1) % 3
	c.Kill(victim)
	if err := os.RemoveAll(c.dataDir(victim)); err != nil {
		t.Fatal(err)
	}
	c.Restart(victim)
	st := c.waitState(victim, replica.ReplicaStateLost, 20*time.Second)
	if st.DataExtent != "unknown" {
		t.Fatalf("a wiped recorded replica must report its data extent unknown, got %q", st.DataExtent)
	}
	c.Kill(victim)

	// Explicit recovery: remove the lost member, re-add it as a new
	// generation, which rebuilds from a checkpoint plus the tail.
	c.removeMember(leader, victim)
	member := c.restartAsGeneration(victim, 2)
	start := time.Now()
	c.addMember(leader, member)
	c.converged(60*time.Second, 0, 1, 2)
	elapsed := time.Since(start)
	// 2.5 MiB through a 1 MiB/s limit with a 1 MiB burst cannot finish in
	// under 1.5s; finishing faster means the rebuild was not throttled.
	if elapsed < 1400*time.Millisecond {
		t.Fatalf("rebuild of a 2.5 MiB checkpoint finished in %s: faster than the host's 1 MiB/s rebuild limit allows", elapsed)
	}
	t.Logf("rebuild took %s", elapsed)
	got := readAll(t, cl, ino)
	if len(got) != 40*len(chunk) {
		t.Fatalf("file holds %d bytes after the rebuild, want %d", len(got), 40*len(chunk))
	}
}
