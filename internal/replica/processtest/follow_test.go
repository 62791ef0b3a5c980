package processtest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// spareReplica is the index of the replica the cluster is generated with
// but that is not a member until a test adds it: the replacement of a lost
// replica, with an ID, address and certificate the mounts were never given.
const spareReplica = 3

// startWithSpare starts r0..r2 as the volume and r3 as a host whose worker
// waits to be added.
func startWithSpare(t *testing.T) *cluster {
	return startCluster(t, clusterOpts{replicas: 4, configure: func(i int, f *host.StandaloneFile) {
		w := &f.Workers[0]
		if i == spareReplica {
			w.Bootstrap = false
			return
		}
		var peers = w.Peers[:0]
		for _, p := range w.Peers {
			if p.ID != fmt.Sprintf("r%d", spareReplica) {
				peers = append(peers, p)
			}
		}
		w.Peers = peers
	}})
}

func (c *cluster) transfer(from, to int) {
	c.t.Helper()
	if code, body := c.post(from, fmt.Sprintf("/v1/workers/%s/%s/transfer/%s", volume, c.peers[from].ID, c.peers[to].ID), nil); code != http.StatusNoContent {
		c.t.Fatalf("transfer the coordinator from r%d to r%d: %d %s", from, to, code, body)
	}
}

// A mount staged with {r0, r1, r2} keeps writing and reading while r2 is
// replaced by r3 and the coordinator moves to r3: the workers' hints carry
// r3's address and server name, and the client follows it without being
// reconfigured.
func TestMountFollowsACoordinatorOutsideItsConfiguredEndpoints(t *testing.T) {
	c := startWithSpare(t)
	cfg := c.clientConfig()
	var configured = cfg.Endpoints[:0]
	for _, ep := range cfg.Endpoints {
		if ep.ID != c.peers[spareReplica].ID {
			configured = append(configured, ep)
		}
	}
	cfg.Endpoints = configured
	if len(cfg.Endpoints) != 3 {
		t.Fatalf("client endpoints %v, want r0..r2", cfg.Endpoints)
	}
	cl := c.client(cfg)
	ino := createFile(t, cl, "data")

	// Continuous writes through the whole change.
	wr := startRecords(t, cl, ino, 30*time.Second)
	wr.waitFor(20, 30*time.Second)

	old := 2
	leader := c.waitLeader(10 * time.Second)
	if leader == old {
		c.transfer(leader, 0)
		leader = c.leaderAmong(10*time.Second, 0, 1)
	}
	spare := c.HostFile(spareReplica).Workers[0].Self
	c.addMember(leader, spare)
	c.removeMember(leader, old)
	c.Kill(old)
	c.converged(30*time.Second, 0, 1, spareReplica)
	wr.waitFor(wr.acknowledged()+20, 30*time.Second)

	c.transfer(leader, spareReplica)
	if got := c.leaderAmong(10*time.Second, 0, 1, spareReplica); got != spareReplica {
		t.Fatalf("the coordinator moved to r%d, want r3", got)
	}
	wr.waitFor(wr.acknowledged()+50, 30*time.Second)
	if got := cl.Coordinator(); got != c.peers[spareReplica].ID {
		t.Fatalf("the client talks to %s, want the new coordinator r3", got)
	}
	n := wr.finish()
	expectRecords(t, cl, ino, n)
	t.Logf("%d records written and read back across the replacement and the coordinator's move", n)
}
