package kubehost

// State digests (docs/replica-engine.md, "State digests"):
// the host publishes each running replica's fsm digest (applied command
// index + SHA-256 of the whole state) in status.digest, so divergence is
// checked from the API once the admin routes are closed to the cluster.
//
// A digest reads every byte of the volume's files while holding the state
// machine's read lock, so the worker applies nothing meanwhile: 1.1 s per
// GiB here, as fast as hashing the files at all (fsm.BenchmarkDigest,
// docs/replica-engine.md). The host therefore takes one only when
//   - the worker's applied index has not moved for the quiet period (no
//     writes flow), and
//   - the index differs from the one it last digested and the digest
//     interval has passed since then, or the VolumeReplica carries a new
//     digest-requested annotation value, or this process has not digested
//     the replica yet (a restart, say after its disk was touched),
//
// and never two at once on one host: the computation runs in the
// background, outside the reconcile, and a replica whose turn is taken
// waits for a later pass. The status pass publishes the latest result.

import (
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// Defaults and bounds of the digest timing (Options).
const (
	// DefaultDigestQuiet is how long the applied index must be still.
	DefaultDigestQuiet = 10 * time.Second
	// DefaultDigestInterval is the least time between two digests of one
	// replica taken on the host's own initiative.
	DefaultDigestInterval = 5 * time.Minute

	minDigestQuiet, maxDigestQuiet       = 100 * time.Millisecond, time.Hour
	minDigestInterval, maxDigestInterval = time.Second, 24 * time.Hour
	// maxDigestRequest bounds the annotation value echoed in the status.
	maxDigestRequest = 63
)

// stateDigester is what the host needs of a worker: replica.Worker.Digest.
type stateDigester interface {
	Digest() (uint64, string, error)
}

// digests tracks every replica of the host for digesting.
type digests struct {
	quiet, interval time.Duration
	log             *slog.Logger
	now             func() time.Time
	// turn is the host's one digest slot.
	turn chan struct{}

	mu       sync.Mutex
	replicas map[string]*digestTrack // by worker key
}

// digestTrack is one replica's digest history in this process.
type digestTrack struct {
	applied uint64    // the worker's applied index as last observed
	still   time.Time // since when it has been applied

	taken      bool      // a digest was attempted in this process
	takenAt    uint64    // the applied index when the last one started
	takenTime  time.Time // when it started
	running    bool
	result     *storagev1alpha1.StateDigest
	lastServed string // the last annotation value answered
}

func newDigests(quiet, interval time.Duration, log *slog.Logger) *digests {
	return &digests{quiet: quiet, interval: interval, log: log, now: time.Now,
		turn: make(chan struct{}, 1), replicas: map[string]*digestTrack{}}
}

// observe records a running worker's applied index, starts a digest when
// one is due and a turn is free, and returns the digest to publish: the
// latest result of this process, else the published one.
func (d *digests) observe(k string, wk stateDigester, st host.Status, request string, published *storagev1alpha1.StateDigest) *storagev1alpha1.StateDigest {
	if len(request) > maxDigestRequest {
		request = request[:maxDigestRequest]
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.replicas[k]
	if t == nil {
		t = &digestTrack{applied: st.AppliedIndex, still: now}
		if published != nil {
			// Answered before a restart: not asked again.
			t.lastServed = published.Request
		}
		d.replicas[k] = t
	}
	if st.AppliedIndex != t.applied {
		t.applied, t.still = st.AppliedIndex, now
	}
	out := published
	if t.result != nil {
		out = t.result
	}
	if t.running || now.Sub(t.still) < d.quiet {
		return out
	}
	asked := request != "" && request != t.lastServed
	moved := !t.taken || (t.takenAt != t.applied && now.Sub(t.takenTime) >= d.interval)
	if !asked && !moved {
		return out
	}
	select {
	case d.turn <- struct{}{}:
	default:
		return out // another replica's digest runs: a later pass
	}
	t.running, t.taken, t.takenAt, t.takenTime = true, true, t.applied, now
	if !asked {
		request = ""
	}
	go d.take(k, t, wk, request)
	return out
}

// take computes one digest and records it, releasing the turn as it
// records (so a replica seen not running finds the turn free).
func (d *digests) take(k string, t *digestTrack, wk stateDigester, request string) {
	start := d.now()
	// The API stores seconds: a finer time would never compare equal to
	// what was written, and every pass would write the status again.
	idx, value, err := wk.Digest()
	took := d.now().Sub(start)
	d.mu.Lock()
	defer d.mu.Unlock()
	<-d.turn
	t.running = false
	if request != "" {
		t.lastServed = request // a failed request is not retried: the log says why
	}
	if err != nil {
		d.log.Warn("state digest failed", "replica", k, "took", took, "error", err)
		return
	}
	t.result = &storagev1alpha1.StateDigest{Index: int64(idx), Value: value, Time: metav1.NewTime(start.UTC().Truncate(time.Second)), Request: request}
	d.log.Info("state digest", "replica", k, "index", idx, "digest", value[:12], "took", took, "request", request)
}

// forget drops a replica whose worker this host no longer runs.
func (d *digests) forget(k string) {
	d.mu.Lock()
	delete(d.replicas, k)
	d.mu.Unlock()
}
