package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/hack/internal/localvolume"
)

// worker is the workload process: a program that writes with fsync, and
// that also runs subprocesses while it holds files open. Every fork/exec
// duplicates the open descriptors and the child's exec closes them again
// (close-on-exec), which the kernel sends to FUSE as a FLUSH of each open
// file: that path must not lose or reorder the writers' data.
type worker struct {
	mnt   string
	led   *ledger
	pace  time.Duration
	seed  uint64
	spawn atomic.Int64
	// acked creates handed to the unlinker.
	created chan string
}

func workerMain(args []string) int {
	fl := flag.NewFlagSet("worker", flag.ContinueOnError)
	mnt := fl.String("mnt", "", "the mounted volume")
	ledgerPath := fl.String("ledger", "", "ledger file (outside the volume)")
	seed := fl.Uint64("seed", 1, "seed of the workload's choices")
	pace := fl.Duration("pace", 15*time.Millisecond, "pause between two operations of one writer")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	led, err := openLedger(*ledgerPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer led.close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	w := &worker{mnt: *mnt, led: led, pace: *pace, seed: *seed, created: make(chan string, 4096)}
	if err := w.setup(); err != nil {
		fmt.Fprintln(os.Stderr, "worker: setup:", err)
		return 1
	}
	led.add(event{Kind: "ready"})
	var wg sync.WaitGroup
	run := func(name string, f func(ctx context.Context, rng *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx, rand.New(rand.NewPCG(w.seed, uint64(len(name))*7919+uint64(name[0]))))
		}()
	}
	for i := range appenders {
		run(fmt.Sprintf("append%d", i), func(ctx context.Context, _ *rand.Rand) { w.appender(ctx, i) })
	}
	run("overwrite", w.overwriter)
	run("create", w.creator)
	run("unlink", w.unlinker)
	run("rename", w.renamer)
	run("truncate", w.truncater)
	run("register-write", w.registerWriter)
	for i := range readers {
		run(fmt.Sprintf("register-read%d", i), func(ctx context.Context, rng *rand.Rand) { w.registerReader(ctx, rng, i) })
	}
	run("spawn", func(ctx context.Context, _ *rand.Rand) { w.spawner(ctx) })
	wg.Wait()
	led.add(event{Kind: "done", Ver: uint64(w.spawn.Load())})
	return 0
}

const (
	appenders      = 3
	overwriteSlots = 64
	renameTargets  = 8
	truncFiles     = 4
	registers      = 2
	readers        = 3
	createSize     = 1024
	renameSize     = 2048
	truncInitial   = 64 << 10
)

// setup makes the directories and the files whose initial state the
// checker counts as acknowledged: everything here is fsynced.
func (w *worker) setup() error {
	for _, d := range []string{"a", "c", "r", "t", "reg"} {
		if err := os.MkdirAll(filepath.Join(w.mnt, d), 0o755); err != nil {
			return err
		}
		if err := syncDir(filepath.Join(w.mnt, d)); err != nil {
			return err
		}
	}
	if err := syncDir(w.mnt); err != nil {
		return err
	}
	var ow []byte
	for s := range overwriteSlots {
		ow = append(ow, overwriteRecord(s, 0)...)
	}
	if err := localvolume.WriteFileSync(filepath.Join(w.mnt, "ow"), ow); err != nil {
		return err
	}
	for k := range truncFiles {
		name := fmt.Sprintf("t/f%d", k)
		if err := localvolume.WriteFileSync(filepath.Join(w.mnt, name), fileContent(name, truncInitial, 0)); err != nil {
			return err
		}
	}
	for k := range registers {
		if err := localvolume.WriteFileSync(filepath.Join(w.mnt, fmt.Sprintf("reg/%d", k)), make([]byte, 8)); err != nil {
			return err
		}
	}
	for _, d := range []string{"", "t", "reg"} {
		if err := syncDir(filepath.Join(w.mnt, d)); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// spawner starts a short child every ~100 ms while the writers hold their
// files open, without waiting for the previous one (at most 64 at once):
// each child's exec closes the duplicated descriptors, and a close blocks
// while the file has writes queued, so during an outage many such FLUSHes
// wait on a writer's file at the same time as its fsync.
func (w *worker) spawner(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, 64)
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		// Start is in the goroutine too: it returns only once the child's
		// exec (and so its closes) completed.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := exec.Command("true").Run(); err != nil {
				w.led.add(event{Kind: "error", Op: "spawn", Err: errName(err)})
			} else {
				w.spawn.Add(1)
			}
			<-slots
		}()
		sleep(ctx, 100*time.Millisecond)
	}
}

// fail records an operation's error (it is not acknowledged) and backs
// off: during a fault every operation fails for a while.
func (w *worker) fail(ctx context.Context, op string, err error) {
	w.led.add(event{Kind: "error", Op: op, Err: errName(err)})
	sleep(ctx, 200*time.Millisecond)
}

// errName is the errno's name (EIO, ENOTCONN, ...), the kind the summary
// counts.
func errName(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		if n := unix.ErrnoName(en); n != "" {
			return n
		}
		return fmt.Sprintf("errno%d", int(en))
	}
	if errors.Is(err, errShort) {
		return "short"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "exit"
	}
	return "other"
}

var errShort = errors.New("short read or write")

// stale says whether a descriptor is beyond use: the mount it was opened
// on is gone (its owner died), so the file must be opened again.
func stale(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.EBADF) || errors.Is(err, syscall.ENODEV) ||
		errors.Is(err, syscall.ESTALE) || errors.Is(err, syscall.ENOENT)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// handle is a descriptor kept open across operations and reopened after
// it went stale (or after repeated errors).
type handle struct {
	path  string
	flags int
	f     *os.File
	errs  int
}

func (h *handle) get() (*os.File, error) {
	if h.f == nil {
		f, err := os.OpenFile(h.path, h.flags, 0o644)
		if err != nil {
			return nil, err
		}
		h.f = f
	}
	return h.f, nil
}

// failed drops the descriptor if it is stale or keeps failing; otherwise
// the same descriptor retries, which is what an application does after an
// fsync error (the mount reports a writeback error once per descriptor).
func (h *handle) failed(err error) {
	h.errs++
	if stale(err) || h.errs >= 3 {
		h.close()
	}
}

func (h *handle) ok() { h.errs = 0 }

func (h *handle) close() {
	if h.f != nil {
		_ = h.f.Close()
		h.f = nil
	}
	h.errs = 0
}

func pwrite(f *os.File, b []byte, off int64) error {
	n, err := f.WriteAt(b, off)
	if err == nil && n != len(b) {
		err = errShort
	}
	return err
}
