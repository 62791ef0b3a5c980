// Command fiobench is `make bench-fio`: the sustained workloads of the
// replica store's targets (docs/performance.md, "Sustained workloads with
// fio") run with fio on the replicated mount, on GlusterFS replica 3 and on
// the raw directory, one target after the other for each workload, in one
// run on one disk. Files are far larger than the mount's write-behind queue,
// the journal and the readahead window, so a figure measures the store, not
// a buffer.
//
// GlusterFS is the mount hack/gluster-bench.sh brings up (its path in
// $CELLFLEET_BENCH_GLUSTER); without it the GlusterFS column is empty.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/hack/internal/localvolume"
)

type options struct {
	bin, dir, gluster, out string
	gib, bigGiB, randGiB   int
	randTime               time.Duration
	only                   map[string]bool
}

func main() {
	var o options
	var only string
	flag.StringVar(&o.bin, "bin", "bin", "directory holding replica-host and csi-node")
	flag.StringVar(&o.dir, "dir", ".fiobench", "working directory on the disk to measure (removed at the end)")
	flag.StringVar(&o.gluster, "gluster", os.Getenv("CELLFLEET_BENCH_GLUSTER"), "GlusterFS replica 3 mount to compare with (hack/gluster-bench.sh up)")
	flag.StringVar(&o.out, "out", "", "also write the table (Markdown) to this file")
	flag.IntVar(&o.gib, "gib", 4, "GiB of the sequential stream and of the cold read (1 to 64)")
	flag.IntVar(&o.bigGiB, "big-gib", 12, "size of the large file written into at its 9th GiB (at least 9, at most 64)")
	flag.IntVar(&o.randGiB, "rand-gib", 2, "GiB of the file the random 4 KiB writes go to (1 to 64)")
	flag.DurationVar(&o.randTime, "rand-time", time.Minute, "how long the random writes run per target (10s to 30m)")
	flag.StringVar(&only, "only", "", "comma-separated workloads to run (default all: "+strings.Join(workloadNames(), ",")+")")
	flag.Parse()
	if err := o.validate(only); err != nil {
		fmt.Fprintln(os.Stderr, "fiobench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	b := &bench{opt: o}
	err := b.run(ctx)
	b.cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fiobench:", err)
		os.Exit(1)
	}
}

func (o *options) validate(only string) error {
	var errs []error
	if o.gib < 1 || o.gib > 64 || o.randGiB < 1 || o.randGiB > 64 {
		errs = append(errs, errors.New("--gib and --rand-gib must be 1 to 64"))
	}
	if o.bigGiB < 9 || o.bigGiB > 64 {
		errs = append(errs, errors.New("--big-gib must be 9 to 64"))
	}
	if o.randTime < 10*time.Second || o.randTime > 30*time.Minute {
		errs = append(errs, errors.New("--rand-time must be 10s to 30m"))
	}
	if only != "" {
		o.only = map[string]bool{}
		for _, w := range strings.Split(only, ",") {
			if !isWorkload(w) {
				errs = append(errs, fmt.Errorf("unknown workload %q (known: %s)", w, strings.Join(workloadNames(), ",")))
			}
			o.only[w] = true
		}
	}
	return errors.Join(errs...)
}

// target is one filesystem the workloads run on.
type target struct {
	name, dir string
}

type bench struct {
	opt     options
	hosts   *localvolume.Hosts
	owner   *localvolume.Owner
	targets []target
	rows    []row
}

func say(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func (b *bench) run(ctx context.Context) error {
	if os.Getuid() != 0 {
		return errors.New("the benchmark mounts a FUSE filesystem and drops the page cache: run it as root")
	}
	dir, err := filepath.Abs(b.opt.dir)
	if err != nil {
		return err
	}
	b.opt.dir = dir
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	// The volume holds the stream, the large file and the random file
	// at once, with room to spare.
	capacity := uint64(b.opt.gib+b.opt.bigGiB+b.opt.randGiB+4) << 30
	g, err := localvolume.Generate(filepath.Join(dir, "volume"), "fiobench", capacity)
	if err != nil {
		return err
	}
	b.hosts = &localvolume.Hosts{Dir: dir, Bin: b.opt.bin, Gen: g}
	for i := range g.HostFiles {
		if err := b.hosts.Start(i); err != nil {
			return err
		}
	}
	b.owner = &localvolume.Owner{Dir: dir, Bin: b.opt.bin, Target: filepath.Join(dir, "mnt"), ClientFile: g.ClientFile,
		Capacity: capacity, Node: "fiobench"}
	if err := b.owner.Start(ctx); err != nil {
		return err
	}
	if err := b.owner.Mount(ctx); err != nil {
		return err
	}
	say("replicated volume of 3 replicas mounted at %s (every replica on this disk)", b.owner.Target)
	b.targets = append(b.targets, target{"mount", b.owner.Target})
	if b.opt.gluster != "" {
		gdir := filepath.Join(b.opt.gluster, "fiobench")
		if err := os.MkdirAll(gdir, 0o755); err != nil {
			return err
		}
		b.targets = append(b.targets, target{"gluster", gdir})
	} else {
		say("no GlusterFS mount given (hack/gluster-bench.sh up): its column stays empty")
	}
	raw := filepath.Join(dir, "raw")
	if err := os.Mkdir(raw, 0o755); err != nil {
		return err
	}
	b.targets = append(b.targets, target{"raw", raw})
	for _, w := range workloads {
		if b.opt.only != nil && !b.opt.only[w.name] {
			continue
		}
		for _, t := range b.targets {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			say("%s on %s", w.name, t.name)
			rs, err := w.run(ctx, b, t)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", w.name, t.name, err)
			}
			b.rows = append(b.rows, rs...)
		}
	}
	table := b.table()
	fmt.Print(table)
	if b.opt.out != "" {
		return os.WriteFile(b.opt.out, []byte(table), 0o644)
	}
	return nil
}

func (b *bench) cleanup() {
	if b.owner != nil {
		b.owner.Stop()
	}
	if b.hosts != nil {
		b.hosts.Stop()
	}
	for _, t := range b.targets {
		if t.name == "gluster" {
			_ = os.RemoveAll(t.dir)
		}
	}
	if b.opt.dir != "" {
		_ = os.RemoveAll(b.opt.dir)
	}
}
