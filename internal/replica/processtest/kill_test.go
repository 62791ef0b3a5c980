package processtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// registerInput is one operation on a register file: an 8-byte value at
// offset 0 (an empty file reads as 0).
type registerInput struct {
	file  int
	write bool
	value uint64
}

var registerModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byFile := map[int][]porcupine.Operation{}
		for _, op := range h {
			f := op.Input.(registerInput).file
			byFile[f] = append(byFile[f], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byFile {
			out = append(out, ops)
		}
		return out
	},
	Init: func() interface{} { return uint64(0) },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		in := input.(registerInput)
		if in.write {
			return true, in.value
		}
		return output.(uint64) == state.(uint64), state
	},
	DescribeOperation: func(input, output interface{}) string {
		in := input.(registerInput)
		if in.write {
			return fmt.Sprintf("f%d := %d", in.file, in.value)
		}
		return fmt.Sprintf("f%d -> %v", in.file, output)
	},
}

// history records operations with times relative to one origin.
type history struct {
	origin time.Time
	mu     sync.Mutex
	ops    []porcupine.Operation
}

func (h *history) now() int64 { return int64(time.Since(h.origin)) }

func (h *history) add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// loadWorker drives one client: register reads and writes on shared files
// and appends of unique records to its own log file.
type loadWorker struct {
	id        int
	cl        *client.Client
	registers []uint64
	log       uint64
	rng       *rand.Rand
	acked     map[int]bool // appended records acknowledged
	uncertain map[int]bool // appended records with an uncertain outcome
	next      int
	progress  *atomic.Int64
	errs      chan error
	// readOnly: only register reads (the concurrent readers sharing one
	// client, so their reads share the coordinator's read-index rounds).
	readOnly bool
}

func (w *loadWorker) run(ctx context.Context, h *history) {
	for ctx.Err() == nil {
		if w.readOnly {
			w.register(ctx, h, false)
			continue
		}
		switch n := w.rng.Intn(10); {
		case n < 4:
			w.append(ctx)
		default:
			w.register(ctx, h, n < 7)
		}
	}
}

func (w *loadWorker) append(ctx context.Context) {
	k := w.next
	w.next++
	_, _, err := w.cl.Append(ctx, w.log, logRecord(w.id, k))
	switch {
	case err == nil:
		w.acked[k] = true
		w.progress.Add(1)
	case errors.Is(err, client.ErrUncertain), ctx.Err() != nil:
		w.uncertain[k] = true
	case errors.Is(err, client.ErrUnavailable):
	default:
		w.report(fmt.Errorf("append %d: %w", k, err))
	}
}

func (w *loadWorker) register(ctx context.Context, h *history, write bool) {
	f := w.rng.Intn(len(w.registers))
	in := registerInput{file: f, write: write, value: uint64(w.id)<<32 | uint64(w.next)}
	w.next++
	call := h.now()
	if write {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], in.value)
		_, err := w.cl.Write(ctx, w.registers[f], 0, b[:])
		switch {
		case err == nil:
			h.add(porcupine.Operation{ClientId: w.id, Input: in, Call: call, Output: uint64(0), Return: h.now()})
			w.progress.Add(1)
		case errors.Is(err, client.ErrUncertain), ctx.Err() != nil:
			// May or may not have taken effect: it may linearize any time
			// after its call.
			h.add(porcupine.Operation{ClientId: w.id, Input: in, Call: call, Output: uint64(0), Return: math.MaxInt64})
		case errors.Is(err, client.ErrUnavailable):
		default:
			w.report(fmt.Errorf("write: %w", err))
		}
		return
	}
	b, err := w.cl.Read(ctx, w.registers[f], 0, 8)
	if err != nil {
		if !errors.Is(err, client.ErrUnavailable) && ctx.Err() == nil {
			w.report(fmt.Errorf("read: %w", err))
		}
		return
	}
	var v uint64
	if len(b) == 8 {
		v = binary.BigEndian.Uint64(b)
	} else if len(b) != 0 {
		w.report(fmt.Errorf("register read returned %d bytes", len(b)))
		return
	}
	h.add(porcupine.Operation{ClientId: w.id, Input: in, Call: call, Output: v, Return: h.now()})
	w.progress.Add(1)
}

func (w *loadWorker) report(err error) {
	select {
	case w.errs <- fmt.Errorf("client %d: %w", w.id, err):
	default:
	}
}

func logRecord(client, k int) []byte { return []byte(fmt.Sprintf("c%02d-%08d\n", client, k)) }

const logRecordSize = 13

func killSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("CELLFLEET_KILL_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 20
}

func TestKillOfCoordinatorLosesNoAcknowledgedWriteAndStaysLinearizable(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	l := startLoad(t, c, 3, 4)
	seeds := killSeeds()
	for seed := 1; seed <= seeds; seed++ {
		rng := rand.New(rand.NewSource(int64(seed)))
		l.progressBy(int64(10+rng.Intn(60)), 30*time.Second, fmt.Sprintf("seed %d: load runs before the kill", seed))
		leader := c.waitLeader(20 * time.Second)
		c.Kill(leader)
		l.progressBy(10, 30*time.Second, fmt.Sprintf("seed %d: clients are served by a new coordinator after kill -9 of r%d", seed, leader))
		c.Restart(leader)
		c.waitState(leader, "Running", 20*time.Second)
	}
	l.check(fmt.Sprintf("%d kill -9 cycles", seeds))
	c.waitLeader(20 * time.Second)
	c.converged(30*time.Second, 0, 1, 2)
	t.Logf("%d kill -9 cycles, %d register operations checked, %d acknowledged operations", seeds, len(l.h.ops), l.progress.Load())
}

// checkLog proves exactly-once across coordinator changes: every
// acknowledged append is present exactly once, none is duplicated.
func checkLog(t *testing.T, cl *client.Client, w *loadWorker) {
	t.Helper()
	data := readAll(t, cl, w.log)
	if len(data)%logRecordSize != 0 {
		t.Fatalf("log of client %d is %d bytes, not whole records", w.id, len(data))
	}
	seen := map[int]int{}
	for off := 0; off < len(data); off += logRecordSize {
		var cid, k int
		if _, err := fmt.Sscanf(string(data[off:off+logRecordSize]), "c%02d-%08d\n", &cid, &k); err != nil || cid != w.id {
			t.Fatalf("log of client %d holds a foreign or garbled record at %d: %q", w.id, off, data[off:off+logRecordSize])
		}
		seen[k]++
	}
	for k, n := range seen {
		if n > 1 {
			t.Fatalf("client %d's append %d was applied %d times: a retry applied twice", w.id, k, n)
		}
		if !w.acked[k] && !w.uncertain[k] {
			t.Fatalf("client %d's append %d is present but was never sent", w.id, k)
		}
	}
	for k := range w.acked {
		if seen[k] != 1 {
			t.Fatalf("client %d's acknowledged append %d was lost", w.id, k)
		}
	}
}
