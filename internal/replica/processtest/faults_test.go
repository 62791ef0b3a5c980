package processtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// leaderAmong waits until one of the given replicas reports Leader.
func (c *cluster) leaderAmong(timeout time.Duration, replicas ...int) int {
	c.t.Helper()
	leader := -1
	eventually(c.t, timeout, fmt.Sprintf("one of %v becomes coordinator", replicas), func() error {
		for _, i := range replicas {
			if st, err := c.statusOf(i); err == nil && st.RaftState == "Leader" {
				leader = i
				return nil
			}
		}
		return errors.New("none reports Leader")
	})
	return leader
}

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

	c.isolate(old, true)
	// The lease is 150ms; allow a few leases for a loaded machine and the
	// status poll. It cannot acknowledge anything meanwhile: no quorum.
	eventually(t, 3*time.Second, "the isolated coordinator steps down within a few leases", func() error {
		st, err := c.statusOf(old)
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
	if _, _, err := pinned.Append(context.Background(), ino, record(999)); err == nil {
		t.Fatalf("the isolated old coordinator acknowledged a write")
	}
	appendRecords(t, cl, ino, 50, 80) // served by the new coordinator

	c.isolate(old, false)
	c.converged(30*time.Second, 0, 1, 2)
	got := readAll(t, cl, ino)
	want := 80 * len(record(0))
	if len(got) != want && len(got) != want+len(record(999)) {
		t.Fatalf("after healing the file holds %d bytes, want the 80 acknowledged records (%d bytes)", len(got), want)
	}
	expectPrefix(t, got, 80)
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
	c.kill(leader)
	c.kill(follower)

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

	c.start(leader)
	c.start(follower)
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
	timing := fastTiming
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
	if code, body := c.post(leader, fmt.Sprintf("/v1/workers/%s/%s/checkpoint", volume, c.peers[leader].ID), nil); code != http.StatusNoContent {
		t.Fatalf("checkpoint: %d %s", code, body)
	}
	victim := (leader + 1) % 3
	c.kill(victim)
	if err := os.RemoveAll(c.dataDir(victim)); err != nil {
		t.Fatal(err)
	}
	c.start(victim)
	st := c.waitState(victim, replica.ReplicaStateLost, 20*time.Second)
	if st.DataExtent != "unknown" {
		t.Fatalf("a wiped recorded replica must report its data extent unknown, got %q", st.DataExtent)
	}
	c.kill(victim)

	// Explicit recovery: remove the lost member, re-add it as a new
	// generation, which rebuilds from a checkpoint plus the tail.
	req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("http://%s/v1/workers/%s/%s/members/%s",
		c.status[leader], volume, c.peers[leader].ID, c.peers[victim].ID), nil)
	if code, body := c.do(req); code != http.StatusNoContent {
		t.Fatalf("remove lost member: %d %s", code, body)
	}
	f := c.hostFile(victim)
	f.Workers[0].Generation, f.Workers[0].Bootstrap = 2, false
	c.writeHostFile(victim, f)
	c.start(victim)
	c.waitState(victim, replica.ReplicaStateRunning, 20*time.Second)
	start := time.Now()
	if code, body := c.post(leader, fmt.Sprintf("/v1/workers/%s/%s/members", volume, c.peers[leader].ID), f.Workers[0].Self); code != http.StatusNoContent {
		t.Fatalf("add rebuilt member: %d %s", code, body)
	}
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
