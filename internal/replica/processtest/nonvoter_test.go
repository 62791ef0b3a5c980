package processtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A replica added while a member is lost joins as a non-voter and votes
// only once caught up. Here r2 is killed and r3, the replica to add, is not
// running at all: with r3 a voter at once, the configuration {r0..r3} would
// need three of four votes with two of them gone, so the add could not
// commit and every write would stall behind it. As a non-voter r3 counts for
// nothing: writes go on, the add answers that r3 catches up, and once r3
// runs a second request promotes it.
func TestAReplicaAddedWhileAMemberIsLostDoesNotStallWrites(t *testing.T) {
	c := startWithSpare(t)
	c.Kill(spareReplica)
	// A generous budget: on a loaded machine two voters may hold an
	// election longer than the default budget, and this test is about the
	// stall a voter-at-once add causes, not about elections.
	cfg := c.clientConfig()
	cfg.RetryBudget = time.Minute
	cl := c.client(cfg)
	ino := createFile(t, cl, "data")

	wr := startRecords(t, cl, ino, 90*time.Second)
	wr.waitFor(20, 30*time.Second)

	lost := 2
	if leader := c.waitLeader(10 * time.Second); leader == lost {
		c.transfer(leader, 0)
	}
	c.Kill(lost)
	wr.waitFor(wr.acknowledged()+20, 30*time.Second)

	spare := c.HostFile(spareReplica).Workers[0].Self
	// add asks the current coordinator; on this loaded machine two voters
	// may elect another one meanwhile (421), which is asked again: the
	// non-voter stays in the configuration across the change.
	add := func() (int, string) {
		for {
			leader := c.leaderAmong(20*time.Second, 0, 1)
			code, body := c.post(leader, fmt.Sprintf("/v1/workers/%s/%s/members", volume, c.peers[leader].ID), spare)
			if code != http.StatusMisdirectedRequest {
				return code, body
			}
		}
	}
	type answer struct {
		code int
		body string
	}
	added := make(chan answer, 1)
	go func() {
		code, body := add()
		added <- answer{code, body}
	}()
	// While the add waits for r3, the volume keeps committing on r0 and r1:
	// with r3 a voter at once not one more write is acknowledged.
	time.Sleep(2 * time.Second)
	before := wr.acknowledged()
	wr.waitFor(before+10, 20*time.Second)
	t.Logf("while r3 was being added: %d records acknowledged after %d", wr.acknowledged()-before, before)
	a := <-added
	if a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "non-voter") {
		t.Fatalf("adding r3 while it does not run: %d %s, want 503 saying it catches up as a non-voter", a.code, a.body)
	}
	wr.waitFor(wr.acknowledged()+20, 10*time.Second)

	c.Restart(spareReplica)
	if code, body := add(); code != http.StatusNoContent {
		t.Fatalf("adding r3 once it runs: %d %s", code, body)
	}
	wr.waitFor(wr.acknowledged()+20, 30*time.Second)
	n := wr.finish()
	c.converged(30*time.Second, 0, 1, spareReplica)
	expectRecords(t, cl, ino, n)
	t.Logf("%d records written and read back; r3 voted only once caught up", n)
}

// A replica that never acknowledged anything is not caught up, however
// short the journal: on a volume with fewer than CaughtUpEntries entries,
// r3, which does not run, must stay a non-voter. Promoted, it would make a
// four-voter configuration whose quorum needs it as soon as one more member
// is lost (the load-dependent failure of the test above, whose journal was
// sometimes that short when r3 was added).
func TestAReplicaThatNeverAnsweredIsNotPromotedOnAShortJournal(t *testing.T) {
	c := startWithSpare(t)
	c.Kill(spareReplica)
	cl := c.client(c.clientConfig())
	createFile(t, cl, "data") // a journal of a handful of entries
	spare := c.HostFile(spareReplica).Workers[0].Self
	leader := c.leaderAmong(20*time.Second, 0, 1, 2)
	code, body := c.post(leader, fmt.Sprintf("/v1/workers/%s/%s/members", volume, c.peers[leader].ID), spare)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "non-voter") {
		t.Fatalf("adding r3, which never ran, to a short journal: %d %s, want 503 saying it catches up as a non-voter", code, body)
	}
}
