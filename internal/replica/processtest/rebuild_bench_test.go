package processtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

// BenchmarkRebuildAgainstBandwidthCap: a wiped follower re-added as a new
// generation catches up from a checkpoint streamed through the host's
// rebuild limit; reported as catch-up throughput relative to the cap
// (target and figures: docs/performance.md, "Replica engine").
func BenchmarkRebuildAgainstBandwidthCap(b *testing.B) {
	const capMiB, dataMiB = 4, 24
	for i := 0; i < b.N; i++ {
		timing := proccluster.FastTiming
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
		c.Checkpoint(b, leader)
		victim := (leader + 1) % 3
		c.Kill(victim)
		os.RemoveAll(c.dataDir(victim))
		c.removeMember(leader, victim)
		member := c.restartAsGeneration(victim, 2)
		b.ResetTimer()
		start := time.Now()
		c.addMember(leader, member)
		c.converged(120*time.Second, 0, 1, 2)
		elapsed := time.Since(start)
		b.StopTimer()
		rate := float64(dataMiB) / elapsed.Seconds()
		b.ReportMetric(rate, "MiB/s")
		b.ReportMetric(rate/capMiB, "ratio-vs-cap")
	}
}
