package processtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
)

// BenchmarkRebuildAgainstBandwidthCap: a wiped follower re-added as a new
// generation catches up from a checkpoint streamed through the host's
// rebuild limit; reported as catch-up throughput relative to the cap
// (DESIGN §8 target: ≥ 0.8).
func BenchmarkRebuildAgainstBandwidthCap(b *testing.B) {
	const capMiB, dataMiB = 4, 24
	for i := 0; i < b.N; i++ {
		timing := fastTiming
		timing.SnapshotThreshold, timing.TrailingLogs = 64, 8
		c := startCluster(b, clusterOpts{timing: timing, hostArgs: []string{"-rebuild-bandwidth-mib", fmt.Sprint(capMiB)}})
		cl := c.client(c.clientConfig())
		a, err := cl.Create(context.Background(), 1, "data", 0o644, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		chunk := make([]byte, 256<<10)
		for k := 0; k < dataMiB*4; k++ {
			chunk[0] = byte(k)
			if _, _, err := cl.Append(context.Background(), a.Ino, chunk); err != nil {
				b.Fatal(err)
			}
		}
		leader := c.waitLeader(10 * time.Second)
		if code, body := c.post(leader, fmt.Sprintf("/v1/workers/%s/%s/checkpoint", volume, c.peers[leader].ID), nil); code != http.StatusNoContent {
			b.Fatalf("checkpoint: %d %s", code, body)
		}
		victim := (leader + 1) % 3
		c.kill(victim)
		os.RemoveAll(c.dataDir(victim))
		req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("http://%s/v1/workers/%s/%s/members/%s",
			c.status[leader], volume, c.peers[leader].ID, c.peers[victim].ID), nil)
		if code, body := c.do(req); code != http.StatusNoContent {
			b.Fatalf("remove member: %d %s", code, body)
		}
		f := c.hostFile(victim)
		f.Workers[0].Generation, f.Workers[0].Bootstrap = 2, false
		c.writeHostFile(victim, f)
		c.start(victim)
		c.waitState(victim, replica.ReplicaStateRunning, 20*time.Second)
		b.ResetTimer()
		start := time.Now()
		if code, body := c.post(leader, fmt.Sprintf("/v1/workers/%s/%s/members", volume, c.peers[leader].ID), f.Workers[0].Self); code != http.StatusNoContent {
			b.Fatalf("add member: %d %s", code, body)
		}
		c.converged(120*time.Second, 0, 1, 2)
		elapsed := time.Since(start)
		b.StopTimer()
		rate := float64(dataMiB) / elapsed.Seconds()
		b.ReportMetric(rate, "MiB/s")
		b.ReportMetric(rate/capMiB, "ratio-vs-cap")
	}
}
