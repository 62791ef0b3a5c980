package processtest

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// load is the recorded workload of the fault runs (kill -9, power cuts):
// writers that read and write shared registers and append to their own
// logs, and optionally readers sharing one client, whose history is then
// checked for linearizability and exactly-once appends.
type load struct {
	t        *testing.T
	setup    *client.Client // creates the files and reads them back for the checks
	writers  []*loadWorker
	h        *history
	progress atomic.Int64 // acknowledged operations
	errs     chan error   // client errors other than uncertain or unavailable
	stop     context.CancelFunc
	wg       sync.WaitGroup
	stopped  bool
}

// loadRegisters is how many register files the workers share.
const loadRegisters = 2

// startLoad starts writers, each on its own client, and readers on one
// shared client; the load stops when the test ends, before the cluster.
func startLoad(t *testing.T, c *cluster, writers, readers int) *load {
	t.Helper()
	l := &load{t: t, setup: c.client(c.clientConfig()), h: &history{origin: time.Now()}, errs: make(chan error, writers+readers)}
	var regs []uint64
	for f := 0; f < loadRegisters; f++ {
		regs = append(regs, createFile(t, l.setup, fmt.Sprintf("register-%d", f)))
	}
	for i := 0; i < writers; i++ {
		l.writers = append(l.writers, &loadWorker{id: i, cl: c.client(c.clientConfig()), registers: regs,
			log: createFile(t, l.setup, fmt.Sprintf("log-%d", i)), rng: rand.New(rand.NewSource(int64(i))),
			acked: map[int]bool{}, uncertain: map[int]bool{}, progress: &l.progress, errs: l.errs})
	}
	all := append([]*loadWorker{}, l.writers...)
	if readers > 0 {
		// Concurrent readers on one client: their reads reach the
		// coordinator together and share its read-index rounds
		// (replica/leader.go); none may return a value older than the last
		// write acknowledged before it was called, across every change of
		// coordinator.
		shared := c.client(c.clientConfig())
		for i := 0; i < readers; i++ {
			all = append(all, &loadWorker{id: writers + i, cl: shared, registers: regs, readOnly: true,
				rng: rand.New(rand.NewSource(int64(writers + i))), progress: &l.progress, errs: l.errs})
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	for _, w := range all {
		l.wg.Add(1)
		go func() { defer l.wg.Done(); w.run(ctx, l.h) }()
	}
	t.Cleanup(l.halt)
	return l
}

// halt stops the workers and waits for them.
func (l *load) halt() {
	if !l.stopped {
		l.stopped = true
		l.stop()
		l.wg.Wait()
	}
}

func (l *load) failOnClientError() {
	select {
	case err := <-l.errs:
		l.t.Fatalf("client operation failed with an error other than uncertain/unavailable: %v", err)
	default:
	}
}

// progressBy waits until n more operations are acknowledged.
func (l *load) progressBy(n int64, within time.Duration, what string) {
	l.t.Helper()
	target := l.progress.Load() + n
	poll.Until(l.t, within, what, func() error {
		l.failOnClientError()
		if got := l.progress.Load(); got < target {
			return fmt.Errorf("%d of %d acknowledged operations", got, target)
		}
		return nil
	})
}

// check halts the load and fails the test unless its register history is
// linearizable and every writer's log holds each acknowledged append
// exactly once; after names the faults the run made.
func (l *load) check(after string) {
	l.t.Helper()
	l.halt()
	l.failOnClientError()
	res, info := porcupine.CheckOperationsVerbose(registerModel, l.h.ops, time.Minute)
	if res != porcupine.Ok {
		path := l.t.TempDir() + "/linearizability.html"
		_ = porcupine.VisualizePath(registerModel, info, path)
		l.t.Fatalf("after %s the register history of %d operations is not linearizable per file (%s); visualization: %s",
			after, len(l.h.ops), res, path)
	}
	for _, w := range l.writers {
		checkLog(l.t, l.setup, w)
	}
}
