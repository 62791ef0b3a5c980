package fuse_test

// GlusterFS replica 3 as a further baseline. The replicated mount's goal is
// stated against GlusterFS replica 3's figures on the same machine
// (docs/performance.md, "Method" and "Against GlusterFS replica 3"); this
// measures that ratio in the same run instead of against figures taken on
// another day. hack/gluster-bench.sh makes a replica-3 volume of three bricks
// on this disk (GlusterFS's defaults, its own FUSE client) and names its
// mount point and bricks in the two variables below; without them the
// benchmarks leave GlusterFS out (`make bench-gluster` does both).

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

const (
	// glusterEnv names a mounted GlusterFS volume to measure beside the
	// mount.
	glusterEnv = "CELLFLEET_BENCH_GLUSTER"
	// glusterBricksEnv lists the volume's brick directories (separated by
	// colons), whose pages a read with the hosts' cache cold drops.
	glusterBricksEnv = "CELLFLEET_BENCH_GLUSTER_BRICKS"
)

// glusterBaseline is one benchmark's measurements on the GlusterFS volume:
// a nil one (no volume named) measures nothing.
type glusterBaseline struct {
	prefix string   // of its metrics' names
	dir    string   // this benchmark's directory on the volume
	bricks []string // for reads with the hosts' cache cold
	sum    float64  // of the measurements' rates
	cpu    time.Duration
	n      int
	lat    []time.Duration // for latency benchmarks
}

// glusterFor gives b a fresh directory on the volume glusterEnv names
// (removed when b ends), or nil without one; prefix starts its metrics'
// names.
func glusterFor(b *testing.B, prefix string) *glusterBaseline {
	b.Helper()
	mnt := os.Getenv(glusterEnv)
	if mnt == "" {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil || st.Type != unix.FUSE_SUPER_MAGIC {
		b.Fatalf("%s=%s is not a mounted FUSE file system (statfs: %v, type %#x): run hack/gluster-bench.sh up",
			glusterEnv, mnt, err, st.Type)
	}
	dir, err := os.MkdirTemp(mnt, "bench-")
	if err != nil {
		b.Fatalf("a directory on the GlusterFS volume: %v", err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	var bricks []string
	if v := os.Getenv(glusterBricksEnv); v != "" {
		bricks = filepath.SplitList(v)
	}
	return &glusterBaseline{prefix: prefix, dir: dir, bricks: bricks}
}

// measure runs one measurement in g's directory and adds its rate, and
// the processor time of this process and of every GlusterFS process.
func (g *glusterBaseline) measure(run func(dir string) float64) {
	if g == nil {
		return
	}
	before := selfCPU() + glusterCPU()
	g.sum += run(g.dir)
	g.cpu += selfCPU() + glusterCPU() - before
	g.n++
}

// latencies runs a latency measurement in g's directory.
func (g *glusterBaseline) latencies(run func(dir string) []time.Duration) {
	if g == nil {
		return
	}
	g.lat = append(g.lat, run(g.dir)...)
	g.n++
}

// report publishes GlusterFS's mean rate as gluster-<unit> and the mount's
// share of it (the goal: docs/performance.md, "Method"); with mib > 0 also
// its processor time per MiB.
func (g *glusterBaseline) report(b *testing.B, unit string, mnt float64, mib int) {
	if g == nil || g.n == 0 {
		return
	}
	rate := g.sum / float64(g.n)
	b.ReportMetric(rate, g.prefix+"gluster-"+unit)
	b.ReportMetric(100*mnt/rate, g.prefix+"%-of-gluster")
	if mib > 0 {
		b.ReportMetric(g.cpu.Seconds()*1000/float64(mib), g.prefix+"gluster-cpu-ms/MiB")
	}
}

// reportLatencies publishes GlusterFS's IOPS, p50 and p99 and the mount's
// share of its IOPS.
func (g *glusterBaseline) reportLatencies(b *testing.B, mntIOPS float64) {
	if g == nil || len(g.lat) == 0 {
		return
	}
	rate := iops(g.lat)
	b.ReportMetric(rate, "gluster-IOPS")
	b.ReportMetric(100*mntIOPS/rate, "%-of-gluster")
	b.ReportMetric(float64(percentile(g.lat, 0.5).Microseconds()), "gluster-p50-µs")
	b.ReportMetric(float64(percentile(g.lat, 0.99).Microseconds()), "gluster-p99-µs")
}

// glusterCPU is the processor time of every GlusterFS process on this
// machine: the FUSE client, the three brick servers, glusterd and the
// self-heal daemon.
func glusterCPU() time.Duration {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || !strings.HasPrefix(string(comm), "gluster") {
			continue
		}
		sum += proccluster.ProcessCPU(pid)
	}
	return sum
}
