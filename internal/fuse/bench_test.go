package fuse_test

// Benchmarks: each workload runs on a mount of a three-replica volume (R=3,
// loopback, every replica on this machine's disk), on go-fuse's own
// loopback example over a directory of the same disk (no replication: this
// machine's FUSE ceiling, loopback_test.go) and on a raw directory of the
// same disk, in the same run; the metrics are the three figures and the
// mount's ratio to each baseline (docs/performance.md, "## FUSE mount").
// The 1 MiB benchmarks also run the copying loopback, the same example
// without passthrough (loopback_test.go).
// Run with `make bench-fuse`; `BENCH_BASE=<commit> make bench-fuse` also
// runs an older commit's benchmarks beside these (hack/bench-fuse-ab.sh).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

// benchTarget is a directory to run a workload in, and the processor time
// of the processes serving it (nil: the kernel's own file system).
type benchTarget struct {
	name string
	dir  string
	cpu  func() time.Duration
	orig string // a loopback's backing directory
}

// benchTargets: the raw directory, go-fuse's loopback example and the
// replicated mount.
type benchTargets struct {
	raw, loop, mnt benchTarget
	c              *cluster
}

func (t benchTargets) all() []benchTarget { return []benchTarget{t.raw, t.loop, t.mnt} }

// benchSetup mounts a fresh volume (replica hosts with production Raft
// timing) and go-fuse's loopback example, and makes a raw directory beside
// them.
func benchSetup(b *testing.B, opt cfuse.Options) benchTargets {
	b.Helper()
	c := &cluster{proccluster.Start(b, proccluster.Options{Capacity: 8 << 30,
		Timing: replica.Timing{JournalBytes: benchJournal}})}
	m := c.mount(b, opt)
	rawDir := filepath.Join(b.TempDir(), "raw")
	if err := os.Mkdir(rawDir, 0o755); err != nil {
		b.Fatal(err)
	}
	l := startLoopback(b, passthroughLoopback)
	return benchTargets{
		raw:  benchTarget{"raw", rawDir, func() time.Duration { return 0 }, ""},
		loop: benchTarget{"loopback", l.dir, l.CPU, l.orig},
		mnt:  benchTarget{"mount", m, c.CPU, ""},
		c:    c,
	}
}

// copyingTarget starts the copying loopback (loopback_test.go) as a
// further baseline.
func copyingTarget(b *testing.B) benchTarget {
	l := startLoopback(b, copyingLoopback)
	return benchTarget{"copying-loopback", l.dir, l.CPU, l.orig}
}

// reportCopying publishes the copying loopback's figure, the mount's share
// of it and its processor time per MiB.
func reportCopying(b *testing.B, unit string, copying, mnt float64, cpu time.Duration, mib int) {
	b.ReportMetric(copying, "copying-loopback-"+unit)
	b.ReportMetric(100*mnt/copying, "%-of-copying-loopback")
	b.ReportMetric(cpu.Seconds()*1000/float64(mib), "copying-loopback-cpu-ms/MiB")
}

// selfCPU is this process's processor time (the writer and, for the
// mount, the FUSE server with its client).
func selfCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pathCPU is the processor time of the whole path to t so far: this
// process and the processes serving t.
func (t benchTarget) pathCPU() time.Duration { return selfCPU() + t.cpu() }

// report publishes one figure per target and the mount's ratio to each
// baseline.
func report(b *testing.B, unit string, raw, loop, mnt float64) {
	b.ReportMetric(raw, "raw-"+unit)
	b.ReportMetric(loop, "loopback-"+unit)
	b.ReportMetric(mnt, "mount-"+unit)
	b.ReportMetric(100*mnt/raw, "%-of-raw")
	b.ReportMetric(100*mnt/loop, "%-of-loopback")
}

// reportCPU publishes the processor time per MiB of the whole path to the
// mount (writer or reader, FUSE server, client, three replica hosts) and
// to the loopback example, and the rate this machine's processors could
// sustain at the mount's cost: figures the machine's other load does not
// move much.
func reportCPU(b *testing.B, loop, mnt time.Duration, mib int) {
	perMiB := mnt.Seconds() * 1000 / float64(mib)
	b.ReportMetric(perMiB, "mount-cpu-ms/MiB")
	b.ReportMetric(loop.Seconds()*1000/float64(mib), "loopback-cpu-ms/MiB")
	b.ReportMetric(float64(runtime.NumCPU())*1000/perMiB, "cpu-bound-MiB/s")
}

// Sizes of the sustained workloads. An A/B that must outlast a queue, a
// cache or the journal raises them (docs/performance.md, "Method"):
// CELLFLEET_BENCH_SEQ_MIB is the sequential file (64 MiB),
// CELLFLEET_BENCH_FSYNC_WRITES the 4 KiB write + fdatasync round (2,000) and
// CELLFLEET_BENCH_JOURNAL_MIB the replicas' journal bound J (production's
// when unset).
var (
	seqBytes         = benchSize("CELLFLEET_BENCH_SEQ_MIB", 64) << 20
	fsyncRoundWrites = benchSize("CELLFLEET_BENCH_FSYNC_WRITES", 2000)
	benchJournal     = uint64(benchSize("CELLFLEET_BENCH_JOURNAL_MIB", 0)) << 20
)

func benchSize(env string, def int) int {
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		panic(fmt.Sprintf("%s=%q: want a positive integer", env, v))
	}
	return n
}

func seqWrite(b *testing.B, dir string) float64 { return seqWriteSized(b, dir, 1<<20) }

func seqWriteSized(b *testing.B, dir string, size int) float64 {
	return seqWriteTo(b, filepath.Join(dir, fmt.Sprintf("seq-%d", time.Now().UnixNano())), size)
}

// seqWriteTo writes seqBytes to a new file name in writes of size, then
// fsyncs it, and returns MiB/s.
func seqWriteTo(b *testing.B, name string, size int) float64 {
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
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
// its commit: the measurement behind Options.WritebackBytes. The copying
// loopback (loopback_test.go) runs beside the three targets.
func BenchmarkSeqWrite1MiB(b *testing.B) {
	for _, mode := range []struct {
		name      string
		writeback int
		maxWrite  int
	}{{"write-behind", 0, 0}, {"synchronous", -1, 0}, {"synchronous/max-write-128KiB", -1, 128 << 10}} {
		b.Run(mode.name, func(b *testing.B) {
			t := benchSetup(b, cfuse.Options{SingleWriter: true, WritebackBytes: mode.writeback,
				MaxWrite: mode.maxWrite})
			copying := copyingTarget(b)
			g := glusterFor(b, "")
			var rate [4]float64
			var cpu [4]time.Duration
			var hosts time.Duration
			for b.Loop() {
				for i, tg := range append(t.all(), copying) {
					before, hostsBefore := tg.pathCPU(), tg.cpu()
					rate[i] += seqWrite(b, tg.dir)
					cpu[i] += tg.pathCPU() - before
					if tg.name == "mount" {
						hosts += tg.cpu() - hostsBefore
					}
				}
				g.measure(func(dir string) float64 { return seqWrite(b, dir) })
			}
			n := float64(b.N)
			report(b, "MiB/s", rate[0]/n, rate[1]/n, rate[2]/n)
			mib := b.N * seqBytes >> 20
			reportCPU(b, cpu[1], cpu[2], mib)
			reportCopying(b, "MiB/s", rate[3]/n, rate[2]/n, cpu[3], mib)
			g.report(b, "MiB/s", rate[2]/n, mib)
			// The split: the three replica hosts, and this process (the
			// writer, the FUSE server and the client) as the rest.
			b.ReportMetric(hosts.Seconds()*1000/float64(mib), "mount-hosts-cpu-ms/MiB")
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
			t := benchSetup(b, cfuse.Options{SingleWriter: true, WritebackBytes: mode.writeback})
			var rate [3]float64
			for b.Loop() {
				for i, tg := range t.all() {
					rate[i] += seqWriteSized(b, tg.dir, 4<<10)
				}
			}
			n := float64(b.N)
			report(b, "MiB/s", rate[0]/n, rate[1]/n, rate[2]/n)
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
			t := benchSetup(b, cfuse.Options{SingleWriter: true, Batch: mode.batch})
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
			var rate [3]float64
			for b.Loop() {
				for i, tg := range t.all() {
					rate[i] += parallel(b, tg.dir, 8, 2000, write)
				}
			}
			n := float64(b.N)
			report(b, "writes/s", rate[0]/n, rate[1]/n, rate[2]/n)
		})
	}
}

// seqRead reads path in 1 MiB reads after dropping the cached pages of
// every file under each of drop (the raw file itself, the loopback
// example's backing file, the replicas' data directories).
func seqRead(b *testing.B, path string, drop ...string) float64 {
	for _, d := range drop {
		dropPages(b, d)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
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

// BenchmarkSeqRead1MiB: a 64 MiB file read in 1 MiB reads with a cold cache
// (MiB/s): the pages of the raw file and of the loopbacks' backing files
// dropped (and the copying loopback's own), the mount's read through a fresh
// read-only mount each time; the replicas' backing files stay in their page
// cache (as the benchmark measured before the work docs/performance.md
// records, so A/B runs compare like with like) except in hosts-cold, where
// their pages are dropped too. With the default readahead window
// (readahead.go) and 1 MiB requests, with the kernel's own 128 KiB window,
// and with 128 KiB requests.
func BenchmarkSeqRead1MiB(b *testing.B) {
	for _, mode := range []struct {
		name      string
		transfer  int
		window    int
		hostsCold bool
	}{{"readahead-1MiB", 0, 0, false}, {"readahead-1MiB/hosts-cold", 0, 0, true},
		{"readahead-1MiB/kernel-window", 0, -1, false}, {"readahead-128KiB", 128 << 10, 0, false}} {
		b.Run(mode.name, func(b *testing.B) {
			t := benchSetup(b, cfuse.Options{SingleWriter: true})
			copying := copyingTarget(b)
			for _, tg := range append(t.all(), copying) {
				seqWrite(b, tg.dir)
			}
			g := glusterFor(b, "")
			var glusterFile string
			if g != nil {
				glusterFile = filepath.Join(g.dir, "seq")
				seqWriteTo(b, glusterFile, 1<<20)
			}
			rawFile := firstFile(b, t.raw.dir)
			loopFile, loopOrig := loopbackFile(b, t.loop)
			copyFile, copyOrig := loopbackFile(b, copying)
			name := filepath.Base(firstFile(b, t.mnt.dir))
			var rate [4]float64
			var cpu [4]time.Duration
			for b.Loop() {
				rate[0] += seqRead(b, rawFile, rawFile)
				before := t.loop.pathCPU()
				rate[1] += seqRead(b, loopFile, loopOrig)
				cpu[1] += t.loop.pathCPU() - before
				// The copying loopback's own page cache is dropped too:
				// unlike passthrough, its reads are cached in the mount.
				before = copying.pathCPU()
				rate[3] += seqRead(b, copyFile, copyOrig, copyFile)
				cpu[3] += copying.pathCPU() - before
				// A fresh mount per round, unmounted after it: its page
				// cache goes with it, as the raw and loopback reads drop
				// theirs, instead of every round's staying until the end.
				fresh, unmount := t.c.mountUntil(b, cfuse.Options{ReadOnly: true, SingleWriter: true,
					MaxReadAhead: mode.transfer, MaxWrite: mode.transfer, ReadAheadWindow: mode.window})
				before = t.mnt.pathCPU()
				var hosts []string
				if mode.hostsCold {
					hosts = append(hosts, t.c.Dir)
				}
				rate[2] += seqRead(b, filepath.Join(fresh, name), hosts...)
				cpu[2] += t.mnt.pathCPU() - before
				unmount()
				// GlusterFS's client pages are always dropped (the mount
				// reads through a fresh mount), its bricks' with the
				// replicas'.
				g.measure(func(string) float64 {
					drop := []string{glusterFile}
					if mode.hostsCold {
						drop = append(drop, g.bricks...)
					}
					return seqRead(b, glusterFile, drop...)
				})
			}
			n := float64(b.N)
			report(b, "MiB/s", rate[0]/n, rate[1]/n, rate[2]/n)
			reportCPU(b, cpu[1], cpu[2], b.N*seqBytes>>20)
			reportCopying(b, "MiB/s", rate[3]/n, rate[2]/n, cpu[3], b.N*seqBytes>>20)
			g.report(b, "MiB/s", rate[2]/n, b.N*seqBytes>>20)
		})
	}
}

// loopbackFile is the first file of a loopback target, and the file it
// passes through to.
func loopbackFile(b *testing.B, tg benchTarget) (file, orig string) {
	file = firstFile(b, tg.dir)
	return file, filepath.Join(tg.orig, filepath.Base(file))
}

// dropPages drops the page cache of every regular file under root. Each
// file is flushed first: FADV_DONTNEED leaves dirty pages, and pages still
// under writeback, cached, so a replica's backing file (which its apply
// writes without a flush until the next checkpoint) would be read partly
// from memory.
func dropPages(b *testing.B, root string) {
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return fmt.Errorf("flush %s: %w", p, err)
		}
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	if err != nil {
		b.Fatalf("drop the cached pages under %s: %v", root, err)
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
	t := benchSetup(b, cfuse.Options{SingleWriter: true})
	n := fsyncRoundWrites
	g := glusterFor(b, "")
	var lat [3][]time.Duration
	for b.Loop() {
		for i, tg := range t.all() {
			lat[i] = append(lat[i], fsyncWrites(b, tg.dir, n)...)
		}
		g.latencies(func(dir string) []time.Duration { return fsyncWrites(b, dir, n) })
	}
	report(b, "IOPS", iops(lat[0]), iops(lat[1]), iops(lat[2]))
	for i, tg := range t.all() {
		b.ReportMetric(float64(percentile(lat[i], 0.5).Microseconds()), tg.name+"-p50-µs")
		b.ReportMetric(float64(percentile(lat[i], 0.99).Microseconds()), tg.name+"-p99-µs")
	}
	g.reportLatencies(b, iops(lat[2]))
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

// BenchmarkCreates: empty file creates per second, each thread's ending
// with an fsync of its directory, from 1 and 8 threads in one directory, 8
// threads each in its own directory, 1 thread without the directory name
// cache (every create then also pays a LOOKUP at the coordinator).
// mount-creates/s is counted in this process
// (which also serves the mount); program-mount-creates/s by a separate
// program (this test binary re-executed, createProgram) doing the same
// through the mount.
func BenchmarkCreates(b *testing.B) {
	for _, mode := range []struct {
		name    string
		threads int
		ownDirs bool
		noCache bool
	}{{"threads=1", 1, false, false}, {"threads=8", 8, false, false},
		{"threads=8/own-directories", 8, true, false},
		{"threads=1/no-name-cache", 1, false, true}} {
		b.Run(mode.name, func(b *testing.B) {
			t := benchSetup(b, cfuse.Options{SingleWriter: true, NoNameCache: mode.noCache})
			g, gProg := glusterFor(b, ""), glusterFor(b, "program-")
			var rate, prog [3]float64
			var cpu [3]time.Duration
			round := 0
			for b.Loop() {
				round++
				inProcess := func(root string) float64 {
					dir := filepath.Join(root, fmt.Sprint(round))
					return createsIn(b, dir, mode.threads, mode.ownDirs, func() float64 {
						return parallel(b, dir, mode.threads, createCount, creator(mode.ownDirs, mode.threads, createCount))
					})
				}
				program := func(root string) float64 {
					pdir := filepath.Join(root, fmt.Sprintf("program-%d", round))
					return createsIn(b, pdir, mode.threads, mode.ownDirs, func() float64 {
						return runCreateProgram(b, createSpec{Dir: pdir, Threads: mode.threads, Count: createCount, OwnDirs: mode.ownDirs})
					})
				}
				for i, tg := range t.all() {
					before := tg.pathCPU()
					rate[i] += inProcess(tg.dir)
					cpu[i] += tg.pathCPU() - before
					prog[i] += program(tg.dir)
				}
				g.measure(inProcess)
				gProg.measure(program)
			}
			n := float64(b.N)
			report(b, "creates/s", rate[0]/n, rate[1]/n, rate[2]/n)
			reportCreateCPU(b, cpu[1], cpu[2], b.N*createCount)
			b.ReportMetric(prog[0]/n, "program-raw-creates/s")
			b.ReportMetric(prog[1]/n, "program-loopback-creates/s")
			b.ReportMetric(prog[2]/n, "program-mount-creates/s")
			g.report(b, "creates/s", rate[2]/n, 0)
			gProg.report(b, "creates/s", prog[2]/n, 0)
		})
	}
}

// createCount is the files each measurement creates.
const createCount = 2000

// reportCreateCPU publishes the processor time per create of the whole
// path (the creating threads, FUSE server, client and three replica hosts,
// or go-fuse's loopback) and the rate this machine's processors could
// sustain at the mount's cost: more threads cannot create faster than
// that, whatever the kernel or the mount serialises.
func reportCreateCPU(b *testing.B, loop, mnt time.Duration, creates int) {
	perCreate := mnt.Seconds() * 1e6 / float64(creates)
	b.ReportMetric(perCreate, "mount-cpu-µs/create")
	b.ReportMetric(loop.Seconds()*1e6/float64(creates), "loopback-cpu-µs/create")
	b.ReportMetric(float64(runtime.NumCPU())*1e6/perCreate, "cpu-bound-creates/s")
}

// createsIn makes dir (and a directory per thread with ownDirs), then runs
// the measurement.
func createsIn(b *testing.B, dir string, threads int, ownDirs bool, measure func() float64) float64 {
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for th := range threads {
		if ownDirs {
			if err := os.Mkdir(filepath.Join(dir, fmt.Sprint("t", th)), 0o755); err != nil {
				b.Fatal(err)
			}
		}
	}
	return measure()
}

func create(dir string, thread, i int) error {
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("c-%d-%d", thread, i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// creator creates in dir, or with ownDirs in the thread's directory
// t<thread> of dir; each thread's last create (of count/threads) then
// fsyncs the directory, as a program making its creates durable does.
func creator(ownDirs bool, threads, count int) func(dir string, thread, i int) error {
	return func(dir string, thread, i int) error {
		if ownDirs {
			dir = filepath.Join(dir, fmt.Sprint("t", thread))
		}
		if err := create(dir, thread, i); err != nil {
			return err
		}
		if i == count/threads-1 {
			return fsyncPath(dir)
		}
		return nil
	}
}

// createSpec is what the create program does.
type createSpec struct {
	Dir     string
	Threads int
	Count   int
	OwnDirs bool
}

// createProgramEnv makes the re-executed test binary the create program.
const createProgramEnv = "CELLFLEET_FUSE_BENCH_CREATES"

// runCreateProgram runs the create program and returns the creates per
// second it measured.
func runCreateProgram(b *testing.B, spec createSpec) float64 {
	js, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(childBin)
	cmd.Env = append(os.Environ(), createProgramEnv+"="+string(js))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("create program: %v\n%s", err, stderr.String())
	}
	rate, err := strconv.ParseFloat(string(bytes.TrimSpace(out)), 64)
	if err != nil {
		b.Fatalf("create program printed %q: %v", out, err)
	}
	return rate
}

// createProgram is a separate program creating files, as an application
// would: it prints its creates per second.
func createProgram() int {
	var spec createSpec
	if err := json.Unmarshal([]byte(os.Getenv(createProgramEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "create program spec:", err)
		return 2
	}
	per := creator(spec.OwnDirs, spec.Threads, spec.Count)
	var wg sync.WaitGroup
	errs := make(chan error, spec.Threads)
	start := time.Now()
	for th := range spec.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range spec.Count / spec.Threads {
				if err := per(spec.Dir, th, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, "create program:", err)
		return 1
	}
	fmt.Println(float64(spec.Count/spec.Threads*spec.Threads) / elapsed.Seconds())
	return 0
}

// BenchmarkStats: stats per second of 500 files, from 1 and 8 threads.
func BenchmarkStats(b *testing.B) {
	for _, threads := range []int{1, 8} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			t := benchSetup(b, cfuse.Options{SingleWriter: true})
			const files = 500
			for _, tg := range t.all() {
				parallel(b, tg.dir, 1, files, create)
			}
			stat := func(dir string, thread, i int) error {
				var st unix.Stat_t
				return unix.Stat(filepath.Join(dir, fmt.Sprintf("c-0-%d", (i*31+thread)%files)), &st)
			}
			var rate [3]float64
			for b.Loop() {
				for i, tg := range t.all() {
					rate[i] += parallel(b, tg.dir, threads, 200_000, stat)
				}
			}
			n := float64(b.N)
			report(b, "stats/s", rate[0]/n, rate[1]/n, rate[2]/n)
		})
	}
}
