package kubehost

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/fsm"
	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// gatedFSM is a real state machine whose digests are counted and, while
// gate is set, wait for it: the test sees a digest in progress.
type gatedFSM struct {
	*fsm.FSM
	n    atomic.Int32
	gate chan struct{}
}

func (g *gatedFSM) Digest() (uint64, string, error) {
	g.n.Add(1)
	if g.gate != nil {
		<-g.gate
	}
	return g.FSM.Digest()
}

func newGated(t *testing.T) *gatedFSM {
	t.Helper()
	f, err := fsm.New(fsm.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return &gatedFSM{FSM: f}
}

// The rate bound: nothing while the applied index moves or before the
// quiet period; one digest per index at most once per interval; a new
// annotation value sooner, once; one digest at a time per host.
func TestDigestsWaitForQuietAndAreRateBounded(t *testing.T) {
	const quiet, interval = time.Second, time.Minute
	d := newDigests(quiet, interval, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var clock atomic.Int64 // the test's clock, read by the digests' goroutines too
	clock.Store(time.Unix(1_000_000, 0).UnixNano())
	d.now = func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(by time.Duration) { clock.Add(int64(by)) }
	g := newGated(t)
	at := func(applied uint64) host.Status {
		return host.Status{Stats: replica.Stats{State: replica.ReplicaStateRunning, AppliedIndex: applied}}
	}
	var published *storagev1alpha1.StateDigest
	pass := func(applied uint64, request string) {
		t.Helper()
		published = d.observe("v/r0", g, at(applied), request, published)
	}
	settle := func() { // the digest runs in the background
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			d.mu.Lock()
			running := d.replicas["v/r0"].running
			d.mu.Unlock()
			if !running {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("digest still running after 10s")
			}
			time.Sleep(time.Millisecond)
		}
	}
	want := func(step string, n int32) {
		t.Helper()
		settle()
		if got := g.n.Load(); got != n {
			t.Fatalf("%s: %d digests taken, want %d", step, got, n)
		}
	}

	// Writes flow: the index moves on every pass, for longer than the quiet period.
	for i := range uint64(10) {
		pass(10+i, "")
		advance(quiet / 2)
	}
	want("while writes flow", 0)
	pass(19, "")
	want("still for less than the quiet period", 0)
	advance(quiet)
	pass(19, "")
	want("still for the quiet period, never digested in this process", 1)
	pass(19, "")
	if published == nil || published.Request != "" {
		t.Fatalf("published %+v, want the digest taken", published)
	}
	advance(2 * interval)
	pass(19, "")
	want("same index, an interval later", 1)

	pass(20, "")
	advance(quiet)
	pass(20, "")
	want("a new index, still, past the interval since the last", 2)
	pass(21, "")
	advance(quiet)
	pass(21, "")
	want("a new index within the interval", 2)

	pass(21, "qual-1")
	want("a new request", 3)
	pass(21, "qual-1")
	if published.Request != "qual-1" {
		t.Fatalf("published %+v, want the request echoed", published)
	}
	pass(21, "qual-1")
	want("the same request again", 3)

	// One at a time per host: while r0's digest runs, r1's waits its turn.
	g.gate = make(chan struct{})
	pass(21, "qual-2")
	other := newGated(t)
	var otherPublished *storagev1alpha1.StateDigest
	otherPublished = d.observe("v/r1", other, at(21), "", otherPublished)
	advance(quiet)
	otherPublished = d.observe("v/r1", other, at(21), "", otherPublished)
	if other.n.Load() != 0 {
		t.Fatal("a second digest started on the host while one runs")
	}
	close(g.gate)
	want("the gated request", 4)
	g.gate = nil
	d.observe("v/r1", other, at(21), "", otherPublished)
	deadline := time.Now().Add(10 * time.Second)
	for other.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if other.n.Load() != 1 {
		t.Fatal("the waiting replica was not digested once the turn was free")
	}
}
