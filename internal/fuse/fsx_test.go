package fuse_test

// A seeded fsx-style exerciser: random writes (also past the end, leaving
// holes), truncates (shrinking and growing), reads and renames over existing
// files, each checked against a shadow model of every file's content. Several
// workers run at once on their own files, so the mount's write batching and
// the engine's group commit are exercised too. Workers fsync now and then;
// after the run every descriptor is fsynced and closed (each answer
// checked), so the first mount has nothing left to drain, and only then a
// fresh, read-only mount (no page cache) reads every file back.

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
)

const (
	fsxWorkers  = 32
	fsxFiles    = 4         // names per worker
	fsxMaxSize  = 128 << 10 // largest file the model grows
	fsxMaxWrite = 16 << 10
)

// fsxOps is the total operation count; CELLFLEET_FSX_OPS overrides it.
func fsxOps(t *testing.T) int {
	if s := os.Getenv("CELLFLEET_FSX_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < fsxWorkers {
			t.Fatalf("CELLFLEET_FSX_OPS=%q must be an integer of at least %d", s, fsxWorkers)
		}
		return n
	}
	return 100_000
}

// fsxFile is one inode of the model: its content and its open descriptor.
type fsxFile struct {
	data []byte
	fd   int
}

type fsxWorker struct {
	t     *testing.T
	dir   string
	id    int
	rng   *rand.Rand
	names map[string]*fsxFile
	next  int
	done  *atomic.Int64
}

func (w *fsxWorker) path(name string) string { return filepath.Join(w.dir, name) }

func (w *fsxWorker) create() error {
	name := fmt.Sprintf("w%d-f%d", w.id, w.next)
	w.next++
	// O_CLOEXEC: a replica host restarted meanwhile (by either fsx test)
	// must not inherit the descriptor and keep the mount busy.
	fd, err := unix.Open(w.path(name), unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	w.names[name] = &fsxFile{fd: fd}
	return nil
}

func (w *fsxWorker) pick() (string, *fsxFile) {
	i := w.rng.IntN(len(w.names))
	for name, f := range w.names {
		if i == 0 {
			return name, f
		}
		i--
	}
	panic("unreachable")
}

// step runs one random operation and checks it against the model.
func (w *fsxWorker) step(op int) error {
	name, f := w.pick()
	switch r := w.rng.IntN(100); {
	case r < 15: // write
		off := w.rng.IntN(fsxMaxSize - fsxMaxWrite)
		buf := make([]byte, 1+w.rng.IntN(fsxMaxWrite))
		for i := range buf {
			buf[i] = byte(w.rng.Uint32())
		}
		if n, err := unix.Pwrite(f.fd, buf, int64(off)); err != nil || n != len(buf) {
			return fmt.Errorf("op %d: pwrite %s [%d,+%d): %d, %v", op, name, off, len(buf), n, err)
		}
		if end := off + len(buf); end > len(f.data) {
			f.data = append(f.data, make([]byte, end-len(f.data))...)
		}
		copy(f.data[off:], buf)
	case r < 20: // truncate
		size := w.rng.IntN(fsxMaxSize)
		if err := unix.Ftruncate(f.fd, int64(size)); err != nil {
			return fmt.Errorf("op %d: ftruncate %s to %d: %w", op, name, size, err)
		}
		if size < len(f.data) {
			f.data = f.data[:size]
		} else {
			f.data = append(f.data, make([]byte, size-len(f.data))...)
		}
	case r < 94: // read
		off := w.rng.IntN(fsxMaxSize)
		buf := make([]byte, 1+w.rng.IntN(fsxMaxWrite))
		n, err := unix.Pread(f.fd, buf, int64(off))
		if err != nil {
			return fmt.Errorf("op %d: pread %s [%d,+%d): %w", op, name, off, len(buf), err)
		}
		want := []byte{}
		if off < len(f.data) {
			want = f.data[off:min(len(f.data), off+len(buf))]
		}
		if !bytes.Equal(buf[:n], want) {
			return fmt.Errorf("op %d: MISMATCH reading %s [%d,+%d): got %d bytes, model has %d (first difference at %d)",
				op, name, off, len(buf), n, len(want), firstDiff(buf[:n], want))
		}
	case r < 96: // fsync: the queued writes commit, and no failure was held back
		if err := unix.Fsync(f.fd); err != nil {
			return fmt.Errorf("op %d: fsync %s: %w", op, name, err)
		}
	default: // rename over another name (or to a fresh one)
		to := fmt.Sprintf("w%d-f%d", w.id, w.next)
		if w.rng.IntN(2) == 0 && len(w.names) > 1 {
			for other := range w.names {
				if other != name {
					to = other
					break
				}
			}
		} else {
			w.next++
		}
		if err := unix.Rename(w.path(name), w.path(to)); err != nil {
			return fmt.Errorf("op %d: rename %s over %s: %w", op, name, to, err)
		}
		if old := w.names[to]; old != nil {
			unix.Close(old.fd) // the replaced file is gone
		}
		w.names[to] = f
		delete(w.names, name)
		for len(w.names) < fsxFiles {
			if err := w.create(); err != nil {
				return err
			}
		}
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// fsxRun is a run of fsxWorkers workers in the background.
type fsxRun struct {
	workers []*fsxWorker
	done    atomic.Int64 // operations completed, all workers
	wg      sync.WaitGroup
	errs    chan error
	waited  sync.Once
}

// startFsx starts ops operations over fsxWorkers workers. The workers
// report through errs, never through t (they are not the test goroutine).
func startFsx(t *testing.T, dir string, seed uint64, ops int) *fsxRun {
	r := &fsxRun{workers: make([]*fsxWorker, fsxWorkers), errs: make(chan error, fsxWorkers)}
	t.Cleanup(func() {
		r.wg.Wait()
		for _, w := range r.workers {
			if w == nil {
				continue
			}
			for _, f := range w.names {
				unix.Close(f.fd) // a failed run's leftovers; closeAll checks a good run's
			}
		}
	})
	for i := range r.workers {
		w := &fsxWorker{t: t, dir: filepath.Join(dir, fmt.Sprintf("w%d", i)), id: i,
			rng: rand.New(rand.NewPCG(seed, uint64(i))), names: map[string]*fsxFile{}, done: &r.done}
		r.workers[i] = w
		// A directory per worker: renames do not serialise the workers.
		if err := os.Mkdir(w.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for range fsxFiles {
			if err := w.create(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, w := range r.workers {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for op := range ops / fsxWorkers {
				if err := w.step(op); err != nil {
					r.errs <- fmt.Errorf("worker %d (seed %d): %w", w.id, seed, err)
					return
				}
				r.done.Add(1)
			}
		}()
	}
	return r
}

// wait waits for every worker and fails t with each worker's error (once).
func (r *fsxRun) wait(t *testing.T) {
	t.Helper()
	r.waited.Do(func() {
		r.wg.Wait()
		close(r.errs)
		for err := range r.errs {
			t.Error(err)
		}
	})
}

// closeAll fsyncs and closes every descriptor, failing t on any error: a
// write-behind failure held back would surface here, and afterwards the
// mount has nothing queued.
func (r *fsxRun) closeAll(t *testing.T) {
	t.Helper()
	for _, w := range r.workers {
		for name, f := range w.names {
			if err := unix.Fsync(f.fd); err != nil {
				t.Errorf("fsync %s after the run: %v", name, err)
			}
			if err := unix.Close(f.fd); err != nil {
				t.Errorf("close %s after the run: %v", name, err)
			}
		}
		clear(w.names)
	}
}

// finish waits for the run, fsyncs and closes every descriptor, then
// reads every file through a new read-only mount (no cache).
func (r *fsxRun) finish(t *testing.T, c *cluster, sub string) {
	t.Helper()
	r.wait(t)
	if t.Failed() {
		return
	}
	models := make([]map[string]*fsxFile, len(r.workers))
	for i, w := range r.workers {
		models[i] = maps.Clone(w.names)
	}
	r.closeAll(t)
	if t.Failed() {
		return
	}
	mnt := c.mount(t, cfuse.Options{ReadOnly: true})
	files := 0
	for i, w := range r.workers {
		for name, f := range models[i] {
			got, err := os.ReadFile(filepath.Join(mnt, sub, filepath.Base(w.dir), name))
			if err != nil {
				t.Errorf("read %s through a fresh mount: %v", name, err)
				continue
			}
			if !bytes.Equal(got, f.data) {
				t.Errorf("MISMATCH: %s through a fresh mount has %d bytes, the model %d (first difference at %d)",
					name, len(got), len(f.data), firstDiff(got, f.data))
			}
			files++
		}
	}
	t.Logf("verified %d files through a fresh mount", files)
}

func fsxSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CELLFLEET_FSX_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CELLFLEET_FSX_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("fsx seed %d (rerun with CELLFLEET_FSX_SEED=%d)", seed, seed)
	return seed
}

// TestFsxRandomOperationsMatchShadowModel: ≥100,000 random operations, zero
// mismatches, while nothing fails.
func TestFsxRandomOperationsMatchShadowModel(t *testing.T) {
	// Latency-bound (each mutation is a quorum commit): the two fsx runs
	// overlap to keep the package within its time budget.
	t.Parallel()
	c := startCluster(t, 1<<30)
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	dir := filepath.Join(mnt, "fsx")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ops := fsxOps(t)
	start := time.Now()
	run := startFsx(t, dir, fsxSeed(t), ops)
	run.wait(t)
	t.Logf("%d operations in %v", ops, time.Since(start).Round(time.Millisecond))
	run.finish(t, c, "fsx")
}

// TestFsxSurvivesCoordinatorKilledTwice: the same run while the coordinator's
// process is killed with SIGKILL at a third and at two thirds of the run,
// the first victim restarted and caught up before the second kill (so a
// quorum remains): two kills inside the run, operations completed after
// each, no error, no mismatch, nothing acknowledged lost.
func TestFsxSurvivesCoordinatorKilledTwice(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1<<30)
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	dir := filepath.Join(mnt, "fsx")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ops := int64(fsxOps(t))
	total := ops / fsxWorkers * fsxWorkers
	run := startFsx(t, dir, fsxSeed(t), int(ops))
	// The kills run on the test goroutine: a failed kill fails the test
	// here, and nothing outlives it.
	kill := func(at int64) int {
		waitUntil(t, fmt.Sprintf("operation %d of the run", at), func() bool { return run.done.Load() >= at })
		before := run.done.Load()
		if before >= total {
			t.Fatalf("the run ended (%d operations) before the kill planned at operation %d", before, at)
		}
		victim := c.KillCoordinator(t)
		gone := run.done.Load()
		t.Logf("killed coordinator r%d at operation %d", victim, before)
		// Operations cross the kill: each worker has at most one in flight,
		// so more than fsxWorkers completed after the process was gone
		// include one begun after it, under the new coordinator.
		waitUntil(t, "operations after the kill", func() bool {
			n := run.done.Load()
			return n > gone+fsxWorkers || n >= total
		})
		if run.done.Load() >= total {
			t.Fatalf("the run ended right after the kill of r%d: no operations are known to have crossed it", victim)
		}
		return victim
	}
	first := kill(ops / 3)
	c.Restart(first)
	c.WaitCaughtUp(t, first, 2*time.Minute)
	second := kill(ops * 2 / 3)
	run.finish(t, c, "fsx")
	t.Logf("2 coordinator kills (r%d, r%d) inside a run of %d operations", first, second, total)
}
