package fuse_test

// Benchmarks: each workload runs on a mount of a three-replica volume (R=3,
// loopback, every replica on this machine's disk) and on a raw directory of
// the same disk in the same run; the metrics are the two figures and their
// ratio (docs/performance.md, "## FUSE mount"). Run with `make bench-fuse`.

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
	"github.com/cellfleet/cellfleet/internal/fuse/fusetest"
	"github.com/cellfleet/cellfleet/internal/replica"
)

// benchTarget is a directory to run a workload in.
type benchTarget struct {
	name string
	dir  string
}

// benchSetup mounts a fresh volume (replica hosts with production Raft
// timing) and makes a raw directory beside it.
func benchSetup(b *testing.B, opt cfuse.Options) (raw, mnt benchTarget, c *cluster) {
	b.Helper()
	c = &cluster{fusetest.StartWithTiming(b, replicaHostBin, 8<<30, replica.Timing{})}
	m := c.mount(b, opt)
	rawDir := filepath.Join(b.TempDir(), "raw")
	if err := os.Mkdir(rawDir, 0o755); err != nil {
		b.Fatal(err)
	}
	return benchTarget{"raw", rawDir}, benchTarget{"mount", m}, c
}

// selfCPU is this process's processor time (the writer and the FUSE
// server with its client).
func selfCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func report(b *testing.B, unit string, raw, mnt float64) {
	b.ReportMetric(raw, "raw-"+unit)
	b.ReportMetric(mnt, "mount-"+unit)
	b.ReportMetric(100*mnt/raw, "%-of-raw")
}

const seqBytes = 64 << 20

func seqWrite(b *testing.B, dir string) float64 { return seqWriteSized(b, dir, 1<<20) }

func seqWriteSized(b *testing.B, dir string, size int) float64 {
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	name := filepath.Join(dir, fmt.Sprintf("seq-%d", time.Now().UnixNano()))
	start := time.Now()
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	for range seqBytes / len(buf) {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	return float64(seqBytes) / (1 << 20) / time.Since(start).Seconds()
}

// BenchmarkSeqWrite1MiB: 64 MiB in 1 MiB writes, then fsync (MiB/s), with
// write-behind (the single-writer default) and with every WRITE waiting for
// its commit: the measurement behind Options.WritebackBytes.
func BenchmarkSeqWrite1MiB(b *testing.B) {
	for _, mode := range []struct {
		name      string
		writeback int
		maxWrite  int
	}{{"write-behind", 0, 0}, {"synchronous", -1, 0}, {"synchronous/max-write-128KiB", -1, 128 << 10}} {
		b.Run(mode.name, func(b *testing.B) {
			raw, mnt, c := benchSetup(b, cfuse.Options{SingleWriter: true, WritebackBytes: mode.writeback,
				MaxWrite: mode.maxWrite})
			var r, m float64
			var cpu time.Duration
			for b.Loop() {
				r += seqWrite(b, raw.dir)
				before := c.CPU() + selfCPU()
				m += seqWrite(b, mnt.dir)
				cpu += c.CPU() + selfCPU() - before
			}
			report(b, "MiB/s", r/float64(b.N), m/float64(b.N))
			// Processor time of the whole replicated path (writer, FUSE
			// server, client, three replica hosts) per MiB, and the rate
			// this machine's processors could sustain at that cost: a
			// figure the machine's other load does not move much.
			perMiB := cpu.Seconds() * 1000 / float64(b.N*seqBytes>>20)
			b.ReportMetric(perMiB, "mount-cpu-ms/MiB")
			b.ReportMetric(float64(runtime.NumCPU())*1000/perMiB, "cpu-bound-MiB/s")
		})
	}
}

// BenchmarkSeqWrite4KiB: 64 MiB in 4 KiB writes (a log writer), then fsync
// (MiB/s), with write-behind and with every WRITE waiting for its commit.
func BenchmarkSeqWrite4KiB(b *testing.B) {
	for _, mode := range []struct {
		name      string
		writeback int
	}{{"write-behind", 0}, {"synchronous", -1}} {
		b.Run(mode.name, func(b *testing.B) {
			raw, mnt, _ := benchSetup(b, cfuse.Options{SingleWriter: true, WritebackBytes: mode.writeback})
			var r, m float64
			for b.Loop() {
				r += seqWriteSized(b, raw.dir, 4<<10)
				m += seqWriteSized(b, mnt.dir, 4<<10)
			}
			report(b, "MiB/s", r/float64(b.N), m/float64(b.N))
		})
	}
}

// BenchmarkParallelWrites: 8 threads each doing 4 KiB writes followed by
// fdatasync, on their own files (writes/s), with the default batching, with
// batching off (one write per engine entry) and with one engine call in
// flight: the measurement behind BatchOptions' defaults.
func BenchmarkParallelWrites(b *testing.B) {
	for _, mode := range []struct {
		name  string
		batch cfuse.BatchOptions
	}{
		{"default", cfuse.BatchOptions{}},
		{"no-batching", cfuse.BatchOptions{MaxOps: 1, InFlight: 64}},
		{"one-in-flight", cfuse.BatchOptions{InFlight: 1}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			raw, mnt, _ := benchSetup(b, cfuse.Options{SingleWriter: true, Batch: mode.batch})
			write := func(dir string, thread, i int) error {
				f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("p-%d", thread)), os.O_CREATE|os.O_WRONLY, 0o644)
				if err != nil {
					return err
				}
				defer f.Close()
				if _, err := f.WriteAt(make([]byte, 4096), int64(i%256)*4096); err != nil {
					return err
				}
				return unix.Fdatasync(int(f.Fd()))
			}
			var r, m float64
			for b.Loop() {
				r += parallel(b, raw.dir, 8, 2000, write)
				m += parallel(b, mnt.dir, 8, 2000, write)
			}
			report(b, "writes/s", r/float64(b.N), m/float64(b.N))
		})
	}
}

func seqRead(b *testing.B, path string) float64 {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	buf := make([]byte, 1<<20)
	start := time.Now()
	n := 0
	for {
		k, err := f.Read(buf)
		n += k
		if err != nil || k == 0 {
			break
		}
	}
	if n != seqBytes {
		b.Fatalf("read %d bytes of %d", n, seqBytes)
	}
	return float64(n) / (1 << 20) / time.Since(start).Seconds()
}

// BenchmarkSeqRead1MiB: a 64 MiB file read in 1 MiB reads with a cold
// cache (the raw file's pages dropped, the mount's read through a fresh
// read-only mount each time) (MiB/s), with the default readahead window
// (readahead.go) and 1 MiB requests, with the kernel's own 128 KiB window,
// and with 128 KiB requests.
func BenchmarkSeqRead1MiB(b *testing.B) {
	for _, mode := range []struct {
		name     string
		transfer int
		window   int
	}{{"default", 0, 0}, {"kernel-window", 0, -1}, {"transfer-128KiB", 128 << 10, 0}} {
		b.Run(mode.name, func(b *testing.B) {
			raw, mnt, c := benchSetup(b, cfuse.Options{SingleWriter: true})
			seqWrite(b, raw.dir)
			seqWrite(b, mnt.dir)
			rawFile := firstFile(b, raw.dir)
			name := filepath.Base(firstFile(b, mnt.dir))
			var r, m float64
			for b.Loop() {
				r += seqRead(b, rawFile)
				fresh := c.mount(b, cfuse.Options{ReadOnly: true, SingleWriter: true,
					MaxReadAhead: mode.transfer, MaxWrite: mode.transfer, ReadAheadWindow: mode.window})
				m += seqRead(b, filepath.Join(fresh, name))
			}
			report(b, "MiB/s", r/float64(b.N), m/float64(b.N))
		})
	}
}

func firstFile(b *testing.B, dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		b.Fatalf("no file in %s: %v", dir, err)
	}
	return filepath.Join(dir, ents[0].Name())
}

// fsyncWrites does n random 4 KiB writes, each followed by fdatasync, and
// returns the latencies.
func fsyncWrites(b *testing.B, dir string, n int) []time.Duration {
	f, err := os.OpenFile(filepath.Join(dir, "rand"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	const span = 16 << 20
	if err := f.Truncate(span); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	lat := make([]time.Duration, n)
	for i := range n {
		off := int64((i * 7919) % (span / 4096) * 4096)
		t0 := time.Now()
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	return lat
}

func percentile(l []time.Duration, p float64) time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func iops(l []time.Duration) float64 {
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	return float64(len(l)) / sum.Seconds()
}

// BenchmarkFsync4KiB: random 4 KiB writes each followed by fdatasync
// (IOPS, p50 and p99 latency).
func BenchmarkFsync4KiB(b *testing.B) {
	raw, mnt, _ := benchSetup(b, cfuse.Options{SingleWriter: true})
	const n = 2000
	var rl, ml []time.Duration
	for b.Loop() {
		rl = append(rl, fsyncWrites(b, raw.dir, n)...)
		ml = append(ml, fsyncWrites(b, mnt.dir, n)...)
	}
	report(b, "IOPS", iops(rl), iops(ml))
	b.ReportMetric(float64(percentile(rl, 0.5).Microseconds()), "raw-p50-µs")
	b.ReportMetric(float64(percentile(ml, 0.5).Microseconds()), "mount-p50-µs")
	b.ReportMetric(float64(percentile(rl, 0.99).Microseconds()), "raw-p99-µs")
	b.ReportMetric(float64(percentile(ml, 0.99).Microseconds()), "mount-p99-µs")
}

// parallel runs per(dir, thread, i) count times over threads goroutines and
// returns operations per second.
func parallel(b *testing.B, dir string, threads, count int, per func(dir string, thread, i int) error) float64 {
	var wg sync.WaitGroup
	start := time.Now()
	errs := make(chan error, threads)
	for th := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range count / threads {
				if err := per(dir, th, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return float64(count/threads*threads) / time.Since(start).Seconds()
}

func create(dir string, thread, i int) error {
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("c-%d-%d", thread, i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// BenchmarkCreates: empty file creates per second from 1 and 8 threads,
// and from 1 thread without the directory name cache (every create then
// also pays a LOOKUP at the coordinator).
func BenchmarkCreates(b *testing.B) {
	for _, mode := range []struct {
		name    string
		threads int
		noCache bool
	}{{"threads=1", 1, false}, {"threads=8", 8, false}, {"threads=1/no-name-cache", 1, true}} {
		threads := mode.threads
		b.Run(mode.name, func(b *testing.B) {
			raw, mnt, _ := benchSetup(b, cfuse.Options{SingleWriter: true, NoNameCache: mode.noCache})
			var r, m float64
			round := 0
			for b.Loop() {
				round++
				for _, d := range []string{raw.dir, mnt.dir} {
					if err := os.Mkdir(filepath.Join(d, fmt.Sprint(round)), 0o755); err != nil {
						b.Fatal(err)
					}
				}
				r += parallel(b, filepath.Join(raw.dir, fmt.Sprint(round)), threads, 2000, create)
				m += parallel(b, filepath.Join(mnt.dir, fmt.Sprint(round)), threads, 2000, create)
			}
			report(b, "creates/s", r/float64(b.N), m/float64(b.N))
		})
	}
}

// BenchmarkStats: stats per second of 500 files, from 1 and 8 threads.
func BenchmarkStats(b *testing.B) {
	for _, threads := range []int{1, 8} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			raw, mnt, _ := benchSetup(b, cfuse.Options{SingleWriter: true})
			const files = 500
			for _, d := range []string{raw.dir, mnt.dir} {
				parallel(b, d, 1, files, create)
			}
			stat := func(dir string, thread, i int) error {
				var st unix.Stat_t
				return unix.Stat(filepath.Join(dir, fmt.Sprintf("c-0-%d", (i*31+thread)%files)), &st)
			}
			var r, m float64
			for b.Loop() {
				r += parallel(b, raw.dir, threads, 200_000, stat)
				m += parallel(b, mnt.dir, threads, 200_000, stat)
			}
			report(b, "stats/s", r/float64(b.N), m/float64(b.N))
		})
	}
}
