package processtest

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// followerLag scrapes replica i's /metrics for its view of follower f.
func (c *cluster) followerLag(i, f int) (lag uint64, err error) {
	resp, err := httpc.Get("http://" + c.Status[i] + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return 0, err
	}
	re := regexp.MustCompile(fmt.Sprintf(`cellfleet_replica_follower_lag_entries\{follower="%s",replica="%s",volume="%s"\} (\d+)`,
		c.peers[f].ID, c.peers[i].ID, volume))
	m := re.FindStringSubmatch(buf.String())
	if m == nil {
		return 0, fmt.Errorf("r%d exports no follower lag for r%d", i, f)
	}
	return strconv.ParseUint(m[1], 10, 64)
}

func TestCoordinatorReportsEachFollowersLagFromItsAcknowledgements(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	// caughtUp asks the current coordinator (it may change under load; a new
	// one learns each follower's match index afresh in its term).
	caughtUp := func(f int) func() error {
		return func() error {
			lead := c.waitLeader(10 * time.Second)
			if lead == f {
				return fmt.Errorf("r%d is coordinating, not following", f)
			}
			lag, err := c.followerLag(lead, f)
			if err == nil && lag != 0 {
				err = fmt.Errorf("r%d lags %d entries behind r%d", f, lag, lead)
			}
			return err
		}
	}
	appendRecords(t, cl, ino, 0, 5)
	poll.Until(t, 10*time.Second, "the coordinator reports both followers caught up", func() error {
		lead := c.waitLeader(10 * time.Second)
		if err := caughtUp((lead + 1) % 3)(); err != nil {
			return err
		}
		return caughtUp((lead + 2) % 3)()
	})

	// A stopped follower acknowledges nothing: its lag grows by every entry
	// committed without it, while the live follower keeps up.
	down := (c.waitLeader(10*time.Second) + 1) % 3
	c.Kill(down)
	const missed = 30
	appendRecords(t, cl, ino, 5, 5+missed)
	lead := c.waitLeader(10 * time.Second)
	live := 3 - lead - down
	poll.Until(t, 10*time.Second, "the live follower is reported caught up", caughtUp(live))
	lag, err := c.followerLag(lead, down)
	if err != nil {
		t.Fatal(err)
	}
	if lag < missed {
		t.Fatalf("the coordinator r%d reports the stopped follower r%d %d entries behind, want at least the %d appends it missed", lead, down, lag, missed)
	}
	// Back up, it catches up and the coordinator sees it.
	c.Restart(down)
	poll.Until(t, 20*time.Second, "the restarted follower is reported caught up", caughtUp(down))
}
