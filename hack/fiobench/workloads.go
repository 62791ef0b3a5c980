package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// row is one figure of one workload on one target.
type row struct {
	workload, metric, target string
	value                    float64
	higherBetter             bool
}

type workload struct {
	name string
	run  func(ctx context.Context, b *bench, t target) ([]row, error)
}

// The workloads of the replica store's targets, in the order they run.
var workloads = []workload{
	{"stream", stream},
	{"into-large", intoLarge},
	{"cold-read", coldRead},
	{"random-4k", random4k},
	{"space", space},
}

func workloadNames() []string {
	var n []string
	for _, w := range workloads {
		n = append(n, w.name)
	}
	return n
}

func isWorkload(name string) bool { return slices.Contains(workloadNames(), name) }

// stream writes --gib GiB into one new file in 1 MiB writes, one GiB after
// the other, with one fsync at the end: the rate of the whole, and of the
// first and the last GiB (a store that copies what it wrote before slows
// down as the file grows).
func stream(ctx context.Context, b *bench, t target) ([]row, error) {
	file := filepath.Join(t.dir, "stream")
	_ = os.Remove(file)
	var rates []float64
	var ms int64
	for k := range b.opt.gib {
		// Each GiB is appended: a write job whose file is smaller than
		// its offset plus size makes fio unlink the file and start a new
		// one, so "--offset" would leave only the last GiB's data.
		args := []string{"--rw=write", "--bs=1m", "--file_append=1", "--size=1g"}
		if k == b.opt.gib-1 {
			args = append(args, "--end_fsync=1")
		}
		r, err := fio(ctx, file, args...)
		if err != nil {
			return nil, err
		}
		rates = append(rates, r.Jobs[0].Write.mibps())
		ms += r.Jobs[0].Write.Runtime
	}
	whole := float64(b.opt.gib<<10) / (float64(max(ms, 1)) / 1000)
	first, last := rates[0], rates[len(rates)-1]
	return []row{
		{"stream", fmt.Sprintf("%d GiB, 1 MiB writes, fsync at the end: MiB/s", b.opt.gib), t.name, whole, true},
		{"stream", "first GiB: MiB/s", t.name, first, true},
		{"stream", "last GiB (with the fsync): MiB/s", t.name, last, true},
		{"stream", "last GiB / first GiB", t.name, last / first, true},
	}, nil
}

// intoLarge writes 1 GiB into the 9th GiB of a --big-gib file and 1 GiB
// into a new file, each with an fsync: a store whose writes cost more in a
// large file shows it in the ratio.
func intoLarge(ctx context.Context, b *bench, t target) ([]row, error) {
	large := filepath.Join(t.dir, "large")
	defer os.Remove(large)
	if _, err := fio(ctx, large, "--rw=write", "--bs=1m", "--size="+gib(b.opt.bigGiB), "--end_fsync=1"); err != nil {
		return nil, err
	}
	into, err := fio(ctx, large, "--rw=write", "--bs=1m", "--offset=8g", "--size=1g", "--end_fsync=1")
	if err != nil {
		return nil, err
	}
	fresh := filepath.Join(t.dir, "fresh")
	defer os.Remove(fresh)
	_ = os.Remove(fresh)
	nw, err := fio(ctx, fresh, "--rw=write", "--bs=1m", "--size=1g", "--end_fsync=1")
	if err != nil {
		return nil, err
	}
	a, n := into.Jobs[0].Write.mibps(), nw.Jobs[0].Write.mibps()
	return []row{
		{"into-large", fmt.Sprintf("1 GiB into the 9th GiB of a %d GiB file: MiB/s", b.opt.bigGiB), t.name, a, true},
		{"into-large", "1 GiB into a new file: MiB/s", t.name, n, true},
		{"into-large", "into the large file / into a new file", t.name, a / n, true},
	}, nil
}

// coldRead reads the stream's file in 1 MiB reads after dropping every
// page cache on the machine (the replicas' backing files too).
func coldRead(ctx context.Context, b *bench, t target) ([]row, error) {
	file := filepath.Join(t.dir, "stream")
	if st, err := os.Stat(file); err != nil || st.Size() < int64(b.opt.gib)<<30 {
		if _, err := fio(ctx, file, "--rw=write", "--bs=1m", "--size="+gib(b.opt.gib), "--end_fsync=1"); err != nil {
			return nil, err
		}
	}
	if err := dropCaches(); err != nil {
		return nil, err
	}
	r, err := fio(ctx, file, "--rw=read", "--bs=1m", "--size="+gib(b.opt.gib))
	if err != nil {
		return nil, err
	}
	return []row{{"cold-read", fmt.Sprintf("%d GiB, 1 MiB reads, caches dropped: MiB/s", b.opt.gib), t.name, r.Jobs[0].Read.mibps(), true}}, nil
}

// random4k writes 4 KiB at random offsets of a --rand-gib file written
// beforehand, each write followed by fsync, for --rand-time.
func random4k(ctx context.Context, b *bench, t target) ([]row, error) {
	file := filepath.Join(t.dir, "random")
	defer os.Remove(file)
	if _, err := fio(ctx, file, "--rw=write", "--bs=1m", "--size="+gib(b.opt.randGiB), "--end_fsync=1"); err != nil {
		return nil, err
	}
	r, err := fio(ctx, file, "--rw=randwrite", "--bs=4k", "--fsync=1", "--size="+gib(b.opt.randGiB),
		fmt.Sprintf("--runtime=%d", int(b.opt.randTime.Seconds())), "--time_based", "--randrepeat=0")
	if err != nil {
		return nil, err
	}
	j := r.Jobs[0]
	return []row{
		{"random-4k", "4 KiB random writes, fsync after each: IOPS", t.name, j.Write.IOPS, true},
		{"random-4k", "write p99 ms", t.name, j.Write.p99ms(), false},
		{"random-4k", "fsync p99 ms", t.name, j.Sync.LatNs.Percentile["99.000000"] / 1e6, false},
	}, nil
}

// space is the bytes each replica holds on disk per byte of live data,
// after the stream (and the checkpoints taken while it was written): the
// mount only.
func space(_ context.Context, b *bench, t target) ([]row, error) {
	if t.name != "mount" {
		return nil, nil
	}
	var live int64
	err := filepath.WalkDir(t.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			live += info.Size()
		}
		return err
	})
	if err != nil || live == 0 {
		return nil, fmt.Errorf("no live data on the mount to compare with (run stream first): %v", err)
	}
	var worst float64
	var each []string
	for _, f := range b.hosts.Gen.HostFiles {
		sf, err := host.LoadStandalone(f)
		if err != nil {
			return nil, err
		}
		used, err := diskUsage(sf.Workers[0].DataDir)
		if err != nil {
			return nil, err
		}
		each = append(each, fmt.Sprintf("%.2f", float64(used)/float64(live)))
		worst = max(worst, float64(used)/float64(live))
	}
	say("bytes on disk per byte of live data, per replica: %s", strings.Join(each, ", "))
	return []row{{"space", fmt.Sprintf("bytes on disk per replica / live bytes (%.1f GiB live), the largest", float64(live)/(1<<30)), t.name, worst, false}}, nil
}
