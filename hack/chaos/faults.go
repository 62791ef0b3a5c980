package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/cellfleet/cellfleet/hack/internal/localvolume"
)

// The fault kinds, drawn with equal odds from the seed. Each is applied and
// undone before the next one starts.
var allFaults = []string{
	"kill-host",        // kill -9 of one host, restarted 1-5 s later (--down-min, --down-max)
	"kill-two-hosts",   // kill -9 of two hosts at once (quorum lost), restarted 1-5 s later
	"kill-coordinator", // kill -9 of the coordinator's host, restarted 1-5 s later
	// kill -9 of two hosts for 32-40 s: past the client's 30 s retry
	// budget, so queued writes fail and the workload sees EIO (the error
	// paths of write-behind, fsync and close).
	"quorum-loss-long",
	"kill-mount-owner", // kill -9 of the mount owner, a new owner and a remount
	"partition",        // the coordinator and one follower cannot reach each other for 2-6 s
	"disk-full",        // one host's disk filled to the last byte for 2-6 s
	"disk-stall",       // one host's disk blocks every write and sync for 1-5 s
	"power-cut",        // kill -9 of one host and loss of everything its disk had not synced
}

func parseFaults(s string) ([]string, error) {
	if s == "" {
		return allFaults, nil
	}
	var out []string
	for _, k := range strings.Split(s, ",") {
		if !slices.Contains(allFaults, k) {
			return nil, fmt.Errorf("unknown fault %q (known: %s)", k, strings.Join(allFaults, ","))
		}
		out = append(out, k)
	}
	return out, nil
}

// faultLoop injects one fault after each gap (--gap-min to --gap-max, 3-8 s
// by default) until the duration is over.
func (n *nemesis) faultLoop(ctx context.Context, until time.Time) error {
	rng := rand.New(rand.NewPCG(n.opt.seed, 0xfa17))
	for {
		gap := between(rng, n.opt.gapMin, n.opt.gapMax)
		if time.Now().Add(gap).After(until) {
			return nil
		}
		sleep(ctx, gap)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		kind := n.kinds[rng.IntN(len(n.kinds))]
		start := time.Now()
		detail, err := n.inject(ctx, rng, kind)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n.sum.fault(kind, start, detail, err)
		if err != nil {
			say("fault %s: %s: FAILED: %v", kind, detail, err)
			// A fault that cannot be undone (a host or the mount that does
			// not come back) ends the run: what follows would test nothing.
			if isFatal(err) {
				return err
			}
			continue
		}
		say("fault %s: %s (%v)", kind, detail, time.Since(start).Round(time.Millisecond))
	}
}

type fatalError struct{ error }

func (e fatalError) Unwrap() error { return e.error }

func isFatal(err error) bool {
	_, ok := err.(fatalError)
	return ok
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

func (n *nemesis) inject(ctx context.Context, rng *rand.Rand, kind string) (string, error) {
	c := n.cl
	restart := func(hosts ...int) error {
		for _, i := range hosts {
			if err := c.start(i); err != nil {
				return fatalError{fmt.Errorf("restart r%d: %w", i, err)}
			}
		}
		return nil
	}
	switch kind {
	case "kill-host", "kill-coordinator", "power-cut":
		victim := rng.IntN(replicas)
		what := "r%d"
		if kind == "kill-coordinator" {
			if i, err := c.coordinator(ctx); err == nil {
				victim, what = i, "coordinator r%d"
			} else {
				what = "r%d (no coordinator answered: " + strings.ReplaceAll(err.Error(), "%", "%%") + ")"
			}
		}
		pid := c.pid(victim)
		c.kill(victim)
		detail := fmt.Sprintf(what+" (pid %d) killed", victim, pid)
		if kind == "power-cut" {
			lost, err := c.disks[victim].pc.Cut()
			detail += fmt.Sprintf(", its disk lost what it had not synced: %+v", lost)
			if err != nil {
				return detail, fatalError{fmt.Errorf("power cut of r%d's disk: %w", victim, err)}
			}
		}
		down := between(rng, n.opt.downMin, n.opt.downMax)
		sleep(ctx, down)
		return detail + fmt.Sprintf(", restarted after %v", down.Round(time.Millisecond)), restart(victim)
	case "kill-two-hosts", "quorum-loss-long":
		a := rng.IntN(replicas)
		b := (a + 1 + rng.IntN(replicas-1)) % replicas
		c.kill(a)
		c.kill(b)
		down := between(rng, n.opt.downMin, n.opt.downMax)
		if kind == "quorum-loss-long" {
			down = between(rng, 32*time.Second, 40*time.Second)
		}
		sleep(ctx, down)
		return fmt.Sprintf("r%d and r%d killed, restarted after %v", a, b, down.Round(time.Millisecond)), restart(a, b)
	case "kill-mount-owner":
		pid := n.own.PID()
		n.killOwner()
		n.sum.ownerKills = append(n.sum.ownerKills, time.Now().UnixNano())
		if err := n.own.Restart(ctx); err != nil {
			return fmt.Sprintf("mount owner (pid %d) killed", pid), fatalError{fmt.Errorf("remount after the owner's kill: %w", err)}
		}
		return fmt.Sprintf("mount owner (pid %d) killed, new owner (pid %d) cleaned the stale mount and mounted again", pid, n.own.PID()), nil
	case "partition":
		coord, err := c.coordinator(ctx)
		if err != nil {
			coord = rng.IntN(replicas)
		}
		other := (coord + 1 + rng.IntN(replicas-1)) % replicas
		c.partition(coord, other, true)
		d := between(rng, 2*time.Second, 6*time.Second)
		sleep(ctx, d)
		c.partition(coord, other, false)
		return fmt.Sprintf("coordinator r%d and r%d partitioned for %v", coord, other, d.Round(time.Millisecond)), nil
	case "disk-full":
		victim := rng.IntN(replicas)
		size, err := c.disks[victim].fill()
		if err != nil {
			_ = c.disks[victim].drain()
			return fmt.Sprintf("r%d's disk", victim), err
		}
		d := between(rng, 2*time.Second, 6*time.Second)
		sleep(ctx, d)
		detail := fmt.Sprintf("r%d's disk full (%d MiB of ballast) for %v", victim, size>>20, d.Round(time.Millisecond))
		if err := c.disks[victim].drain(); err != nil {
			return detail, fatalError{fmt.Errorf("remove the ballast: %w", err)}
		}
		return detail + n.reviveIfFailed(ctx, victim), nil
	case "disk-stall":
		victim := rng.IntN(replicas)
		c.disks[victim].pc.Freeze()
		d := between(rng, time.Second, 5*time.Second)
		sleep(ctx, d)
		blocked := c.disks[victim].pc.Blocked()
		c.disks[victim].pc.Thaw()
		return fmt.Sprintf("r%d's disk stalled for %v (%d operations were waiting)", victim, d.Round(time.Millisecond), blocked) +
			n.reviveIfFailed(ctx, victim), nil
	}
	return "", fmt.Errorf("unknown fault %q", kind)
}

// reviveIfFailed restarts a host that is not ready 10 s after its disk
// came back: a replica stops its state machine on a disk error (fail-stop)
// and only a restart brings it back, as an operator or kubelet would.
func (n *nemesis) reviveIfFailed(ctx context.Context, i int) string {
	if localvolume.WaitFor(ctx, 10*time.Second, func() bool { return n.cl.ready(ctx, i) }) == nil {
		return ""
	}
	n.cl.kill(i)
	if err := n.cl.start(i); err != nil {
		return fmt.Sprintf("; r%d was not ready 10 s later and could not be restarted: %v", i, err)
	}
	return fmt.Sprintf("; r%d was not ready 10 s later (fail-stop on the disk error): restarted", i)
}
