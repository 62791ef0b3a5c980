package processtest

import (
	"fmt"
	"net/http"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
)

// addMember has the coordinator, replica leader, add p to the volume
// through its host's admin API.
func (c *cluster) addMember(leader int, p replica.Peer) {
	c.t.Helper()
	if code, body := c.post(leader, fmt.Sprintf("/v1/workers/%s/%s/members", volume, c.peers[leader].ID), p); code != http.StatusNoContent {
		c.t.Fatalf("add member %s through r%d: %d %s", p.ID, leader, code, body)
	}
}

// removeMember has the coordinator, replica leader, remove replica i from
// the volume through its host's admin API.
func (c *cluster) removeMember(leader, i int) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("http://%s/v1/workers/%s/%s/members/%s",
		c.Status[leader], volume, c.peers[leader].ID, c.peers[i].ID), nil)
	if code, body := c.do(req); code != http.StatusNoContent {
		c.t.Fatalf("remove member r%d through r%d: %d %s", i, leader, code, body)
	}
}

// restartAsGeneration restarts replica i, stopped and removed from the
// volume, as a new generation that does not bootstrap: an empty member for
// the coordinator to add and rebuild. It returns the member to add.
func (c *cluster) restartAsGeneration(i int, gen uint64) replica.Peer {
	c.t.Helper()
	f := c.HostFile(i)
	f.Workers[0].Generation, f.Workers[0].Bootstrap = gen, false
	c.WriteHostFile(i, f)
	c.Restart(i)
	c.waitState(i, replica.ReplicaStateRunning, 20*time.Second)
	return f.Workers[0].Self
}
