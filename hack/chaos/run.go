package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/hack/internal/localvolume"
)

// nemesis is one run: the cluster, the mount owner, the workload process.
type nemesis struct {
	opt    options
	kinds  []string
	sum    *summary
	cl     *cluster
	own    *localvolume.Owner
	worker *exec.Cmd
	done   chan struct{} // closed when the worker exited
}

func (n *nemesis) ledgerPath() string { return filepath.Join(n.opt.dir, "ledger.jsonl") }

func (n *nemesis) run(ctx context.Context) error {
	if os.Getuid() != 0 {
		return errors.New("the nemesis mounts FUSE filesystems and tmpfs disks: run it as root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("/dev/fuse is missing: %w", err)
	}
	dir := n.opt.dir
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the previous run's %s (is something still mounted there?): %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	n.cl = &cluster{dir: dir, bin: n.opt.bin}
	say("3 replica hosts, each on a %d MiB disk behind a power-cut filesystem, raft routes through proxies", n.opt.diskMiB)
	if err := n.cl.setup(n.opt.diskMiB); err != nil {
		return fmt.Errorf("set up the cluster: %w", err)
	}
	for i := range replicas {
		if err := n.cl.start(i); err != nil {
			return err
		}
	}
	if err := n.cl.waitReady(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("the hosts did not become ready: %w", err)
	}
	say("replica hosts ready (pids %d %d %d)", n.cl.pid(0), n.cl.pid(1), n.cl.pid(2))
	n.own = &localvolume.Owner{Dir: dir, Bin: n.opt.bin, Target: filepath.Join(dir, "mnt"), ClientFile: n.cl.gen.ClientFile,
		Capacity: 4 << 30, Node: "chaos-node"}
	if err := os.Mkdir(n.own.Target, 0o755); err != nil {
		return err
	}
	if err := n.own.Start(ctx); err != nil {
		return err
	}
	if err := n.own.Mount(ctx); err != nil {
		return err
	}
	say("4 GiB volume mounted single-writer at %s by the mount owner (pid %d)", n.own.Target, n.own.PID())
	if err := n.startWorker(ctx); err != nil {
		return err
	}
	say("workload process started (pid %d): appends, overwrites, creates, unlinks, renames, truncates, registers, and a child process every 100 ms",
		n.worker.Process.Pid)

	until := time.Now().Add(n.opt.duration)
	prog := n.progress(ctx)
	ferr := n.faultLoop(ctx, until)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if ferr != nil {
		return fmt.Errorf("fault injection: %w", ferr)
	}
	if n.workerExited() {
		return errors.New("the workload process exited during the run (see logs/worker.log)")
	}

	say("faults over: healing every route and disk, restarting every host")
	n.cl.healAll()
	var notReady error
	if err := n.restartAll(ctx); err != nil {
		// Still check the ledger: the mount may work with two replicas,
		// and a loss is worth reporting even when a host stays down.
		notReady = fmt.Errorf("the hosts did not become ready after the faults: %w", err)
		say("%v; checking the ledger anyway", notReady)
	} else {
		say("every host is ready; letting the workload run 5 s on a healthy volume, then stopping it")
		sleep(ctx, 5*time.Second)
	}
	n.stopWorker()
	prog()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(notReady, n.check(ctx))
}

// restartAll starts every host that is down and restarts every one that
// is not ready (a replica that stopped on a disk error needs a restart),
// then waits until all are ready.
func (n *nemesis) restartAll(ctx context.Context) error {
	for i := range replicas {
		if err := n.cl.start(i); err != nil {
			return err
		}
	}
	// A host restarted by the last fault may still be catching up.
	if n.cl.waitReady(ctx, 20*time.Second) == nil {
		return nil
	}
	for i := range replicas {
		if n.cl.pid(i) != 0 && !n.cl.ready(ctx, i) {
			say("r%d is running but not ready: kill -9 and restart", i)
			n.cl.kill(i)
		}
		if err := n.cl.start(i); err != nil {
			return err
		}
	}
	return n.cl.waitReady(ctx, 2*time.Minute)
}

// check verifies the ledger through the mount, then again through a new
// mount after the mount owner was killed with -9.
func (n *nemesis) check(ctx context.Context) error {
	evs, err := loadLedger(n.ledgerPath())
	if err != nil {
		return fmt.Errorf("read the ledger: %w", err)
	}
	st := fold(evs)
	n.sum.Acknowledged, n.sum.Errors, n.sum.ErrorsByOp, n.sum.SpawnedChildren = st.acked, st.errs, st.errsByOp, st.spawned
	total := 0
	for _, v := range st.acked {
		total += v
	}
	if total == 0 {
		return errors.New("the workload acknowledged nothing: the run tested nothing")
	}
	if n.opt.injectLoss {
		if err := injectLoss(n.own.Target, st); err != nil {
			return fmt.Errorf("inject a loss: %w", err)
		}
	}
	say("verifying %d acknowledged operations through the mount", total)
	found := verify(n.own.Target, "after-heal", st)
	n.report(found)
	say("kill -9 of the mount owner, a new owner and a remount, then verifying again")
	n.killOwner()
	if err := n.own.Restart(ctx); err != nil {
		return fmt.Errorf("remount for the second verification: %w", err)
	}
	found = verify(n.own.Target, "after-owner-kill-remount", st)
	n.report(found)
	say("checking %d register operations for linearizability (porcupine)", len(st.registerH))
	checked, err := checkLinearizable(st, n.sum.ownerKills, n.opt.dir, func(kind, name, format string, args ...any) {
		n.report([]finding{{Phase: "linearizability", Kind: kind, Name: name, Detail: fmt.Sprintf(format, args...)}})
	})
	n.sum.RegisterChecked = checked
	return err
}

func (n *nemesis) report(found []finding) {
	for _, f := range found {
		say("LOST OR WRONG [%s] %s %s: %s", f.Phase, f.Kind, f.Name, f.Detail)
	}
	n.sum.LostOrWrong = append(n.sum.LostOrWrong, found...)
}

func (n *nemesis) startWorker(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd, err := localvolume.Start(n.opt.dir, "worker", self, "--worker", "--mnt", n.own.Target, "--ledger", n.ledgerPath(),
		"--seed", fmt.Sprint(n.opt.seed))
	if err != nil {
		return err
	}
	// The workload's working directory is outside the mount: a new owner
	// must be able to detach a dead mount.
	n.worker = cmd
	n.done = make(chan struct{})
	go func() { _ = cmd.Wait(); close(n.done) }()
	return localvolume.WaitFor(ctx, 60*time.Second, func() bool {
		if n.workerExited() {
			return true
		}
		b, _ := os.ReadFile(n.ledgerPath())
		return strings.Contains(string(b), `"k":"ready"`)
	})
}

func (n *nemesis) workerExited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// stopWorker asks the workload to stop (it finishes its current operations)
// and kills it if it does not within 2 minutes: its ledger stays valid,
// what was in flight is simply not acknowledged.
func (n *nemesis) stopWorker() {
	if n.worker == nil {
		return
	}
	_ = n.worker.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(2 * time.Minute):
		say("the workload did not stop within 2 minutes: kill -9")
		n.sum.WorkerKilled = true
		_ = n.worker.Process.Signal(syscall.SIGKILL)
		<-n.done
	}
	n.worker = nil
}

// progress prints the ledger's counts every 15 s; the returned function
// stops it and prints a last line.
func (n *nemesis) progress(ctx context.Context) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	print := func() {
		evs, err := loadLedger(n.ledgerPath())
		if err != nil {
			return
		}
		st := fold(evs)
		say("progress: acknowledged %s; errors %s", counts(st.acked), counts(st.errs))
	}
	go func() {
		defer close(done)
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-t.C:
				print()
			}
		}
	}()
	return func() { close(stop); <-done; print() }
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for i, k := range ks {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

// cleanup stops everything in order: the workload (it holds files in the
// mount), the mount and its owner, the hosts, the proxies and disks.
func (n *nemesis) cleanup(keep bool) {
	if n.worker != nil {
		_ = n.worker.Process.Signal(syscall.SIGKILL)
		<-n.done
		n.worker = nil
	}
	if n.own != nil {
		n.own.Stop()
	}
	if n.cl != nil {
		n.cl.shutdown()
	}
	if keep {
		say("kept %s for debugging (logs/, ledger.jsonl, volume/, disks' contents are gone with their tmpfs)", n.opt.dir)
		return
	}
	_ = os.RemoveAll(n.opt.dir)
	say("cleaned up: workload, mount, mount owner, hosts, proxies and disks stopped, %s removed", n.opt.dir)
}

// killOwner kills the mount owner with -9 and says when it did not exit:
// the next owner aborts its stuck FUSE connection.
func (n *nemesis) killOwner() {
	pid := n.own.PID()
	if !n.own.Kill() {
		say("mount owner (pid %d) did not exit %v after SIGKILL: the next owner aborts its FUSE connection", pid, localvolume.ExitWait)
	}
}
