package processtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/journal"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

// checkpointIndex is the index of the newest checkpoint in replica i's data
// directory (raft's file store keeps each in snapshots/<term>-<index>-<ms>),
// or 0.
func (c *cluster) checkpointIndex(i int) uint64 {
	c.t.Helper()
	ents, err := os.ReadDir(filepath.Join(c.dataDir(i), journal.CheckpointDir, "snapshots"))
	if err != nil {
		return 0
	}
	var top uint64
	for _, e := range ents {
		parts := strings.Split(e.Name(), "-")
		if len(parts) != 3 || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if idx, err := strconv.ParseUint(parts[1], 10, 64); err == nil {
			top = max(top, idx)
		}
	}
	return top
}

// checkpointTiming makes the coordinator checkpoint and compact its journal
// after a few hundred entries, so a stopped follower falls behind its
// journal within seconds.
func checkpointTiming() replica.Timing {
	t := proccluster.FastTiming
	t.SnapshotThreshold, t.TrailingLogs, t.SnapshotInterval = 100, 50, 500*time.Millisecond
	return t
}

// A follower that was away while the coordinator compacted past it rejoins
// through a checkpoint. Its old journal tail must not stay in the way of
// the entries after the checkpoint: once the other follower is killed, the
// rejoined one alone carries the quorum.
func TestFollowerRejoinedThroughCheckpointCarriesTheQuorum(t *testing.T) {
	c := startCluster(t, clusterOpts{timing: checkpointTiming()})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	n := 200
	appendRecords(t, cl, ino, 0, n) // every replica's journal holds entries

	lead := c.waitLeader(10 * time.Second)
	away := (lead + 1) % 3
	st, err := c.ReplicaStatus(away)
	if err != nil {
		t.Fatal(err)
	}
	if st.LastIndex == 0 {
		t.Fatalf("r%d's journal is empty before it is stopped; the test needs an old tail", away)
	}
	awayLast := st.LastIndex
	c.Kill(away)

	// Write until the coordinator's checkpoint is well past what the stopped
	// follower holds: with 50 trailing entries its journal no longer has
	// the entries the follower lacks, so only a checkpoint can catch it up.
	deadline := time.Now().Add(90 * time.Second)
	for {
		lead = c.waitLeader(10 * time.Second)
		if c.checkpointIndex(lead) > awayLast+200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator r%d did not checkpoint past index %d (newest checkpoint %d)", lead, awayLast+200, c.checkpointIndex(lead))
		}
		appendRecords(t, cl, ino, n, n+50)
		n += 50
	}
	ckpt := c.checkpointIndex(lead)

	c.Restart(away)
	c.waitState(away, replica.ReplicaStateRunning, 30*time.Second)
	poll.Until(t, 30*time.Second, fmt.Sprintf("r%d installs a checkpoint at or past %d", away, ckpt), func() error {
		if got := c.checkpointIndex(away); got < ckpt {
			return fmt.Errorf("r%d's newest checkpoint is %d", away, got)
		}
		return nil
	})
	appendRecords(t, cl, ino, n, n+50)
	n += 50
	c.expectHealth(away, true, 10*time.Second)

	lead = c.waitLeader(10 * time.Second)
	if lead == away {
		t.Fatalf("the rejoined follower r%d became coordinator; the test needs it to follow", away)
	}
	other := 3 - lead - away
	c.Kill(other)
	// Only the coordinator and the rejoined follower are left: every write
	// now needs the rejoined follower's append.
	appendRecords(t, cl, ino, n, n+100)
	n += 100
	expectRecords(t, cl, ino, n)
	c.converged(30*time.Second, lead, away)
}
