package replica_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// heldTransfers is an outbound rebuild gate whose checkpoint streams pass
// their first bytes (enough to flush the request ahead of them) and then
// wait until released: a rebuild that takes as long as the test wants.
type heldTransfers struct {
	once    sync.Once
	release chan struct{}
}

func (h *heldTransfers) Begin() (func(io.Reader) io.Reader, func(), bool) {
	return func(r io.Reader) io.Reader { return &heldReader{r: r, h: h, pass: 1 << 20} }, func() {}, true
}

func (h *heldTransfers) open() { h.once.Do(func() { close(h.release) }) }

type heldReader struct {
	r    io.Reader
	h    *heldTransfers
	pass int // bytes still let through before the hold
}

func (hr *heldReader) Read(p []byte) (int, error) {
	if hr.pass <= 0 {
		<-hr.h.release
		return hr.r.Read(p)
	}
	if len(p) > hr.pass {
		p = p[:hr.pass]
	}
	n, err := hr.r.Read(p)
	hr.pass -= n
	return n, err
}

// A follower that rejoins too far behind for the journal rebuilds from a
// checkpoint; until the checkpoint is in, its own commit index equals its
// applied index, yet it is as far behind as the coordinator committed past
// it. Stats.Lag (status.lag of its VolumeReplica) must say that distance,
// or a replacement would look caught up before it holds the journal
// (docs/decisions/0006-replica-replacement.md).
func TestAFollowerRebuildingFromACheckpointReportsItsDistanceBehindTheCoordinator(t *testing.T) {
	held := &heldTransfers{release: make(chan struct{})}
	g := newGroup(t, 3, func(c *replica.Config) {
		c.Timing.TrailingLogs = 4
		c.Timing.SnapshotThreshold = 1 << 30 // checkpoints only when the test takes one
		c.Outbound = held
	})
	t.Cleanup(held.open) // runs before the workers close
	leader := waitForLeader(t, g)
	follower := 1
	if leader == 1 {
		follower = 2
	}
	c := g.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := c.Create(ctx, client.RootIno, "lag", 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.workers[follower].Close(); err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 8<<10)
	const writes = 300
	for i := range writes {
		block[0] = byte(i)
		if _, err := c.Write(ctx, f.Ino, uint64(i)*uint64(len(block)), block); err != nil {
			t.Fatalf("write %d with one follower down: %v", i, err)
		}
	}
	if err := g.workers[leader].Checkpoint(); err != nil {
		t.Fatal(err)
	}
	committed := g.workers[leader].Stats().CommitIndex

	w, err := replica.New(g.cfgs[follower])
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	// A follower closing mid-checkpoint waits for the transfer: release it
	// first (cleanups run last-registered first).
	t.Cleanup(func() { held.open(); w.Close() })
	var st replica.Stats
	poll.UntilTrue(t, 30*time.Second, "the rejoining follower knows the coordinator's commit index", func() bool {
		st = w.Stats()
		return st.State == replica.ReplicaStateRunning && st.CoordinatorCommit >= committed-4
	})
	if st.Lag() < writes-10 {
		t.Fatalf("a follower receiving a checkpoint at coordinator commit %d, itself at applied %d and commit %d, reports lag %d: "+
			"it must be its distance behind the coordinator, at least %d", st.CoordinatorCommit, st.AppliedIndex, st.CommitIndex, st.Lag(), writes-10)
	}
	t.Logf("rebuilding follower: applied %d, own commit %d, coordinator commit %d, lag %d", st.AppliedIndex, st.CommitIndex, st.CoordinatorCommit, st.Lag())

	held.open()
	poll.UntilTrue(t, time.Minute, "the follower caught up once its checkpoint arrived", func() bool {
		st = w.Stats()
		return st.AppliedIndex >= committed && st.Lag() <= 64
	})
}

func waitForLeader(t *testing.T, g *group) int {
	t.Helper()
	leader := -1
	poll.UntilTrue(t, 30*time.Second, "a coordinator elected", func() bool {
		for i, w := range g.workers {
			if w.Stats().RaftState == "Leader" {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}
