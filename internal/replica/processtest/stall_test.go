package processtest

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A follower whose disk stops moving, without failing, keeps answering the
// coordinator's heartbeats, so raft keeps it as a member while its journal
// stays where it was: the volume commits on the other two and has no
// redundancy left. The follower must say so within seconds (appends never
// fail here, so only the stall check can notice), the other two must stay
// healthy and writable, and once the disk moves again the follower must
// catch up, report healthy and hold every acknowledged write.
func TestFollowerWhoseDiskStallsReportsUnhealthyWhileItsHostStaysReady(t *testing.T) {
	disks := newPowerDisks(3)
	c := startCluster(t, clusterOpts{disk: disks.disk})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 20)
	lead := c.waitLeader(10 * time.Second)
	f := (lead + 1) % 3
	other := 3 - lead - f
	for i := range c.peers {
		c.expectHealth(i, true, 10*time.Second)
	}

	frozen := disks.fs[f]
	frozen.Freeze()
	// Registered after the cluster's cleanups, so it runs before them: a
	// process blocked on the frozen disk cannot be killed until it thaws.
	t.Cleanup(frozen.Thaw)
	n := 20
	start := time.Now()
	deadline := start.Add(stallReportWithin)
	for {
		// Writes go on with the coordinator and the other follower.
		appendRecords(t, cl, ino, n, n+10)
		n += 10
		h, err := c.health(f)
		if err == nil && h.status == "false" && h.readyz == http.StatusOK && h.metric == "0" {
			if !strings.Contains(h.reason, "stalled") {
				t.Fatalf("r%d's health reason %q does not name the stalled journal", f, h.reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r%d's disk is frozen (%d operations blocked) but after %s it reports status Healthy=%s (%s), /readyz %d, cellfleet_replica_healthy %s (err %v)",
				f, frozen.Blocked(), stallReportWithin, h.status, h.reason, h.readyz, h.metric, err)
		}
	}
	t.Logf("r%d reported its stall %s after its disk froze (%d records written meanwhile)", f, time.Since(start).Round(10*time.Millisecond), n-20)
	// The stall was the disk holding the follower back, not an error.
	if frozen.Blocked() == 0 {
		t.Fatalf("r%d reports a stall but nothing waits on its frozen disk", f)
	}
	c.expectHealth(lead, true, 5*time.Second)
	c.expectHealth(other, true, 5*time.Second)

	frozen.Thaw()
	appendRecords(t, cl, ino, n, n+10)
	n += 10
	c.expectHealth(f, true, 20*time.Second)
	expectRecords(t, cl, ino, n)
	c.converged(20*time.Second, 0, 1, 2)
}

// stallReportWithin bounds how long a stalled follower may go unreported:
// replica.StallAfter plus the health sampling and a margin for a loaded
// machine.
const stallReportWithin = 10 * time.Second
