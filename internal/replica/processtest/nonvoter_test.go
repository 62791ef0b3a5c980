package processtest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
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
	c.kill(spareReplica)
	// A generous budget: on a loaded machine two voters may hold an
	// election longer than the default budget, and this test is about the
	// stall a voter-at-once add causes, not about elections.
	cfg := c.clientConfig()
	cfg.RetryBudget = time.Minute
	cl := c.client(cfg)
	ino := createFile(t, cl, "data")

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var written atomic.Int64
	done := make(chan error, 1)
	go func() {
		for k := 0; ctx.Err() == nil; k++ {
			wctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			_, _, err := cl.Append(wctx, ino, record(k))
			cancel()
			if err != nil {
				done <- fmt.Errorf("append of record %d was not acknowledged: %w", k, err)
				return
			}
			written.Store(int64(k + 1))
		}
		done <- nil
	}()
	waitWritten := func(n int64, within time.Duration) {
		t.Helper()
		eventually(t, within, fmt.Sprintf("%d records written", n), func() error {
			select {
			case err := <-done:
				t.Fatal(err)
			default:
			}
			if got := written.Load(); got < n {
				return fmt.Errorf("%d written", got)
			}
			return nil
		})
	}
	waitWritten(20, 30*time.Second)

	lost := 2
	if leader := c.waitLeader(10 * time.Second); leader == lost {
		c.transfer(leader, 0)
	}
	c.kill(lost)
	waitWritten(written.Load()+20, 30*time.Second)

	spare := c.hostFile(spareReplica).Workers[0].Self
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
	before := written.Load()
	waitWritten(before+10, 20*time.Second)
	t.Logf("while r3 was being added: %d records acknowledged after %d", written.Load()-before, before)
	a := <-added
	if a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "non-voter") {
		t.Fatalf("adding r3 while it does not run: %d %s, want 503 saying it catches up as a non-voter", a.code, a.body)
	}
	waitWritten(written.Load()+20, 10*time.Second)

	c.start(spareReplica)
	if code, body := add(); code != http.StatusNoContent {
		t.Fatalf("adding r3 once it runs: %d %s", code, body)
	}
	waitWritten(written.Load()+20, 30*time.Second)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.converged(30*time.Second, 0, 1, spareReplica)
	n := int(written.Load())
	expectRecords(t, cl, ino, n)
	t.Logf("%d records written and read back; r3 voted only once caught up", n)
}
