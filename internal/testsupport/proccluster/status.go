package proccluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/replica/standalone"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// statusTimeout bounds one status or metrics request.
const statusTimeout = 5 * time.Second

// AdminClient reaches host i's admin socket; a request URL's host is
// ignored.
func (c *Cluster) AdminClient(i int, timeout time.Duration) *http.Client {
	sock := c.Admin[i]
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
}

// ReplicaStatus reads replica i's worker status from its host.
func (c *Cluster) ReplicaStatus(i int) (host.Status, error) {
	var st host.Status
	resp, err := c.AdminClient(i, statusTimeout).Get(fmt.Sprintf("http://r%d/v1/workers/%s/r%d", i, Volume, i))
	if err != nil {
		return st, fmt.Errorf("status of r%d: %w", i, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return st, fmt.Errorf("status of r%d: HTTP %d: %s", i, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("status of r%d: %w", i, err)
	}
	return st, nil
}

// Checkpoint makes replica i take a checkpoint now, through its host's
// admin API.
func (c *Cluster) Checkpoint(t testing.TB, i int) {
	t.Helper()
	url := fmt.Sprintf("http://r%d/v1/workers/%s/r%d/checkpoint", i, Volume, i)
	resp, err := c.AdminClient(i, time.Minute).Post(url, "application/json", nil)
	if err != nil {
		t.Fatalf("checkpoint r%d: %v", i, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		t.Fatalf("checkpoint r%d: %s %s", i, resp.Status, body)
	}
}

// Metrics returns replica host i's Prometheus exposition.
func (c *Cluster) Metrics(t testing.TB, i int) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: statusTimeout}).Get(fmt.Sprintf("http://%s/metrics", c.Status[i]))
	if err != nil {
		t.Fatalf("metrics of r%d: %v", i, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("metrics of r%d: %v", i, err)
	}
	return string(body)
}

// Dial connects a client to the volume with Config.
func (c *Cluster) Dial(t testing.TB) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, c.Config)
	if err != nil {
		t.Fatalf("connect to the volume: %v\n%s", err, c.Logs())
	}
	return cl
}

// Coordinator returns the index of the replica coordinating now.
func (c *Cluster) Coordinator(t testing.TB) int {
	t.Helper()
	i, err := standalone.Coordinator(context.Background(), c.ClientFile, time.Minute)
	if err != nil {
		t.Fatalf("find the coordinator: %v", err)
	}
	if i < 0 || i >= len(c.procs) {
		t.Fatalf("the coordinator is r%d, not a replica of this volume", i)
	}
	return i
}

// KillCoordinator kills the coordinating replica's process and returns its
// index.
func (c *Cluster) KillCoordinator(t testing.TB) int {
	t.Helper()
	i := c.Coordinator(t)
	c.Kill(i)
	return i
}

// WaitCaughtUp waits until replica i (restarted) follows a coordinator
// again and has applied everything the coordinator had committed when i
// came back: from then on the volume keeps its quorum if another replica
// dies.
func (c *Cluster) WaitCaughtUp(t testing.TB, i int, timeout time.Duration) {
	t.Helper()
	var target uint64 // the coordinator's commit index once i runs
	poll.Until(t, timeout, fmt.Sprintf("replica r%d catches up", i), func() error { return c.caughtUp(i, &target) })
}

// caughtUp reports why replica i has not caught up with *target yet,
// sampling the coordinator's commit index into *target once i runs.
func (c *Cluster) caughtUp(i int, target *uint64) error {
	st, err := c.ReplicaStatus(i)
	if err != nil {
		return err
	}
	if st.State != replica.ReplicaStateRunning || st.RaftState != "Follower" {
		return fmt.Errorf("r%d is %s/%s", i, st.State, st.RaftState)
	}
	for j := range c.procs {
		if *target != 0 {
			break
		}
		if j == i || !c.Running(j) {
			continue
		}
		if lt, err := c.ReplicaStatus(j); err == nil && lt.RaftState == "Leader" {
			*target = lt.CommitIndex
		}
	}
	if *target == 0 {
		return fmt.Errorf("no coordinator to compare r%d with", i)
	}
	if st.AppliedIndex < *target {
		return fmt.Errorf("r%d applied %d of %d", i, st.AppliedIndex, *target)
	}
	return nil
}
