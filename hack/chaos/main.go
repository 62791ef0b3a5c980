// Command chaos is `make chaos`, the nemesis: a data-loss hunt on a real
// replicated FUSE volume. It starts three replica-host processes on loopback
// (each on its own small disk behind a power-cut filesystem), the mount owner
// and a single-writer mount, runs a workload in a separate process (a program
// that also runs subprocesses while it holds files open) that keeps a ledger
// of every acknowledged operation outside the volume, and injects faults
// chosen from a seed: kills of hosts and of the coordinator, loss of quorum,
// a kill of the mount owner and a remount, partitions, a full disk, a stalled
// disk and power cuts. At the end it heals everything, checks the ledger
// against the volume, kills the mount owner once more, remounts and checks
// again, prints a JSON summary and exits non-zero if anything acknowledged
// was lost or wrong.
//
// The same binary is the workload: `chaos --worker ...` is how the nemesis
// re-executes itself, so the workload is a process of its own and its
// ledger is not written by the process that injects the faults.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

type options struct {
	bin, dir, summary string
	duration          time.Duration
	seed              uint64
	keep              bool
	diskMiB           int
	faults            string
	injectLoss        bool
	gapMin, gapMax    time.Duration
	downMin, downMax  time.Duration
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--worker" {
		os.Exit(workerMain(os.Args[2:]))
	}
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory holding replica-host and csi-node")
	flag.StringVar(&o.dir, "dir", ".chaos", "working directory (removed at the end unless --keep and a failure)")
	flag.DurationVar(&o.duration, "duration", 5*time.Minute, "how long faults are injected")
	flag.Uint64Var(&o.seed, "seed", 0, "seed of the fault schedule and of the workload (0: from the clock)")
	flag.BoolVar(&o.keep, "keep", false, "keep --dir (logs, ledger, disks' backing files) when the run fails")
	flag.StringVar(&o.summary, "summary", "", "where to write the JSON summary (default: chaos-summary.json next to --dir)")
	flag.IntVar(&o.diskMiB, "disk-mib", 768, "size of each host's disk (a tmpfs) in MiB")
	flag.StringVar(&o.faults, "faults", "", "comma-separated fault kinds to draw from (default: all; see faults.go)")
	flag.DurationVar(&o.gapMin, "gap-min", 3*time.Second, "shortest wait between one fault healed and the next (a kind named twice in --faults is drawn twice as often)")
	flag.DurationVar(&o.gapMax, "gap-max", 8*time.Second, "longest wait between faults")
	flag.DurationVar(&o.downMin, "down-min", time.Second, "shortest time a killed host stays down (kill-host, kill-two-hosts, kill-coordinator, power-cut)")
	flag.DurationVar(&o.downMax, "down-max", 5*time.Second, "longest time a killed host stays down")
	flag.BoolVar(&o.injectLoss, "inject-loss", false, "self-test of the checker: before verifying, zero one acknowledged append record and empty one acknowledged created file through the mount; the run must then report both")
	flag.Parse()
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	abs, err := filepath.Abs(o.dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	o.dir = abs
	if o.summary == "" {
		o.summary = filepath.Join(filepath.Dir(abs), "chaos-summary.json")
	}
	if o.gapMin <= 0 || o.gapMax <= o.gapMin || o.downMin < 0 || o.downMax <= o.downMin {
		fmt.Fprintln(os.Stderr, "chaos: --gap-min and --down-min must be positive and below --gap-max and --down-max")
		os.Exit(2)
	}
	kinds, err := parseFaults(o.faults)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	say("seed %d (replay with --seed %d, or CHAOS_SEED=%d make chaos), duration %v", o.seed, o.seed, o.seed, o.duration)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	n := &nemesis{opt: o, kinds: kinds, sum: newSummary(o)}
	n.sum.FaultKinds = kinds
	runErr := n.run(ctx)
	if runErr != nil {
		n.sum.ToolError = runErr.Error()
	}
	failed := runErr != nil || len(n.sum.LostOrWrong) > 0 || ctx.Err() != nil
	n.cleanup(failed && o.keep)
	if err := n.sum.write(o.summary); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: write summary:", err)
		failed = true
	}
	switch {
	case ctx.Err() != nil:
		say("interrupted: everything the nemesis started is stopped")
		os.Exit(130)
	case runErr != nil:
		fmt.Fprintln(os.Stderr, "chaos failed:", runErr)
		os.Exit(1)
	case len(n.sum.LostOrWrong) > 0:
		fmt.Fprintf(os.Stderr, "chaos: %d acknowledged operations lost or wrong (seed %d)\n", len(n.sum.LostOrWrong), o.seed)
		os.Exit(3)
	}
	say("no acknowledged operation was lost (seed %d)", o.seed)
}

func say(format string, args ...any) {
	fmt.Printf("%s ==> "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}
