package replica_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// rawAppendRate measures fsync'd appends of size bytes to a file on the same
// disk as the replicas' data: the baseline every commit figure is divided by.
func rawAppendRate(b *testing.B, dir string, size, n int) (perSec float64, p50, p99 time.Duration) {
	b.Helper()
	fh, err := os.Create(filepath.Join(dir, "raw-baseline"))
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, size)
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := fh.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(fh.Fd())); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	p50, p99 = percentiles(lat)
	return float64(n) / time.Since(start).Seconds(), p50, p99
}

func percentiles(lat []time.Duration) (time.Duration, time.Duration) {
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0, 0
	}
	return lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
}

// rawAppender is the raw baseline: fdatasync'd appends of one size to a
// file on the same disk as the replicas' data.
type rawAppender struct {
	fh  *os.File
	buf []byte
}

func newRawAppender(b *testing.B, dir string, size int) *rawAppender {
	b.Helper()
	fh, err := os.Create(filepath.Join(dir, "raw-interleaved"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fh.Close() })
	return &rawAppender{fh: fh, buf: make([]byte, size)}
}

func (r *rawAppender) append(b *testing.B) time.Duration {
	t0 := time.Now()
	if _, err := r.fh.Write(r.buf); err != nil {
		b.Fatal(err)
	}
	if err := unix.Fdatasync(int(r.fh.Fd())); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

func sum(lat []time.Duration) (t time.Duration) {
	for _, d := range lat {
		t += d
	}
	return t
}

// BenchmarkCommit: one client, one write per commit, waiting for each
// (latency-bound), for R=1 and R=3 with 4 KiB and 1 MiB payloads. Every
// commit is followed by one raw fdatasync'd append of the same size to the
// same disk, so commit and baseline see the same machine conditions (the
// development machine is shared); ratio-vs-raw is raw time / commit time.
func BenchmarkCommit(b *testing.B) {
	for _, r := range []int{1, 3} {
		for _, size := range []int{4 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("R=%d/%dKiB", r, size>>10), func(b *testing.B) {
				g := newGroup(b, r)
				c := g.client(b)
				ctx := context.Background()
				a, err := c.Create(ctx, client.RootIno, "f", 0o644, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				raw := newRawAppender(b, filepath.Dir(g.cfgs[0].DataDir), size)
				buf := make([]byte, size)
				lat := make([]time.Duration, 0, b.N)
				rawLat := make([]time.Duration, 0, b.N)
				b.SetBytes(int64(size))
				b.ResetTimer()
				var rawCPU time.Duration
				cpu0 := cpuTime()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					if _, err := c.Write(ctx, a.Ino, uint64(i%64)*uint64(size), buf); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
					r0 := cpuTime()
					rawLat = append(rawLat, raw.append(b))
					rawCPU += cpuTime() - r0
				}
				b.StopTimer()
				// Processor time of the whole path (client, TLS, three
				// workers' raft, journals and applies) per MiB committed,
				// the raw baseline's own share left out: a figure the
				// machine's other load moves much less than rates.
				pathCPU := cpuTime() - cpu0 - rawCPU
				b.ReportMetric(pathCPU.Seconds()*1000/(float64(b.N)*float64(size)/(1<<20)), "cpu-ms/MiB")
				commitT, rawT := sum(lat), sum(rawLat)
				p50, p99 := percentiles(lat)
				rp50, rp99 := percentiles(rawLat)
				b.ReportMetric(float64(b.N)/commitT.Seconds(), "commits/s")
				b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(b.N)/rawT.Seconds(), "raw-fsyncs/s")
				b.ReportMetric(float64(rp50.Microseconds())/1000, "raw-p50-ms")
				b.ReportMetric(float64(rp99.Microseconds())/1000, "raw-p99-ms")
				b.ReportMetric(rawT.Seconds()/commitT.Seconds(), "ratio-vs-raw")
				b.ReportMetric(rp50.Seconds()/p50.Seconds(), "p50-ratio-vs-raw")
			})
		}
	}
}

// BenchmarkBatchedSmallCommits: many concurrent writers of 128-byte writes
// on an R=3 volume; concurrent calls share log entries and journal syncs
// (group commit), and each WriteBatch call carries several writes.
func BenchmarkBatchedSmallCommits(b *testing.B) {
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=64/batch=%d", batch), func(b *testing.B) {
			g := newGroup(b, 3)
			c := g.client(b)
			ctx := context.Background()
			a, err := c.Create(ctx, client.RootIno, "f", 0o644, 0, 0)
			if err != nil {
				b.Fatal(err)
			}
			const writers = 64
			calls := b.N/batch + 1
			var wg sync.WaitGroup
			next := make(chan int, calls)
			for i := 0; i < calls; i++ {
				next <- i
			}
			close(next)
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					reqs := make([]client.WriteReq, batch)
					for i := range next {
						for k := range reqs {
							reqs[k] = client.WriteReq{Ino: a.Ino, Offset: uint64((i*batch+k)%4096) * 128, Data: make([]byte, 128)}
						}
						if _, err := c.WriteBatch(ctx, reqs); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(calls*batch)/elapsed.Seconds(), "writes/s")
			raw, _, _ := rawAppendRate(b, filepath.Dir(g.cfgs[0].DataDir), 128, 200)
			b.ReportMetric(raw, "raw-fsyncs/s")
		})
	}
}

func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// cpuTime is this process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHostedWorkers: per-worker RSS, goroutines and idle CPU with 1,
// 64 and 256 single-replica workers in one process.
func BenchmarkHostedWorkers(b *testing.B) {
	for _, n := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			runtime.GC()
			rss0, g0 := rssBytes(), runtime.NumGoroutine()
			var ws []*replica.Worker
			for i := 0; i < n; i++ {
				g := newGroup(b, 1)
				ws = append(ws, g.workers...)
			}
			for _, w := range ws {
				for w.Stats().RaftState != "Leader" {
					runtime.Gosched()
				}
			}
			runtime.GC()
			rss1, g1 := rssBytes(), runtime.NumGoroutine()
			const idle = 3 * time.Second
			cpu0 := cpuTime()
			time.Sleep(idle) // the measurement window itself: nothing to wait for
			cpu := cpuTime() - cpu0
			for i := 0; i < b.N; i++ {
			}
			b.ReportMetric(float64(rss1-rss0)/float64(n)/(1<<20), "MiB-RSS/worker")
			b.ReportMetric(float64(g1-g0)/float64(n), "goroutines/worker")
			b.ReportMetric(100*cpu.Seconds()/idle.Seconds()/float64(n), "idle-CPU-%/worker")
		})
	}
}
