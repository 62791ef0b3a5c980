package host

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// Limits are the host's resource bounds (docs/replica-engine.md,
// "replica-host"). They are bounds, not quotas or capacity guarantees.
type Limits struct {
	MaxWorkers        int   // hosted workers
	MaxStarts         int   // concurrent worker starts
	MaxHTTPOperations int   // concurrent shared HTTP operations
	MaxCaptures       int   // concurrent checkpoint captures
	MaxRebuilds       int   // concurrent outbound rebuilds
	RebuildBandwidth  int64 // bytes/s shared by outbound rebuilds
}

// DefaultLimits are the host's documented defaults (docs/replica-engine.md,
// "replica-host").
func DefaultLimits() Limits {
	return Limits{MaxWorkers: 128, MaxStarts: 4, MaxHTTPOperations: 32, MaxCaptures: 2,
		MaxRebuilds: 2, RebuildBandwidth: 32 << 20}
}

// Validate rejects bounds that cannot work.
func (l Limits) Validate() error {
	for name, v := range map[string]int64{"max-workers": int64(l.MaxWorkers), "max-concurrent-starts": int64(l.MaxStarts),
		"max-http-operations": int64(l.MaxHTTPOperations), "max-checkpoint-captures": int64(l.MaxCaptures),
		"max-outbound-rebuilds": int64(l.MaxRebuilds), "rebuild-bandwidth": l.RebuildBandwidth} {
		if v < 1 {
			return fmt.Errorf("%s must be at least 1, got %d", name, v)
		}
	}
	return nil
}

// Bound names an admission bound in conditions and metrics.
type Bound string

// Bounds.
const (
	BoundWorkers  Bound = "workers"
	BoundStarts   Bound = "starts"
	BoundHTTP     Bound = "http_operations"
	BoundCaptures Bound = "checkpoint_captures"
	BoundRebuilds Bound = "outbound_rebuilds"
)

// slots is a counting semaphore with observable use.
type slots struct {
	bound    Bound
	ch       chan struct{}
	waiting  atomic.Int64
	rejected atomic.Int64
}

func newSlots(b Bound, n int) *slots { return &slots{bound: b, ch: make(chan struct{}, n)} }

// TryAcquire takes a slot if one is free.
func (s *slots) TryAcquire() bool {
	select {
	case s.ch <- struct{}{}:
		return true
	default:
		s.rejected.Add(1)
		return false
	}
}

// Acquire waits for a slot.
func (s *slots) Acquire(ctx context.Context) error {
	select {
	case s.ch <- struct{}{}:
		return nil
	default:
	}
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case s.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release frees a slot.
func (s *slots) Release()     { <-s.ch }
func (s *slots) InUse() int   { return len(s.ch) }
func (s *slots) Limit() int   { return cap(s.ch) }
func (s *slots) Waiting() int { return int(s.waiting.Load()) }

// outbound admits checkpoint transfers to peers being rebuilt and charges
// them to one shared rate limiter.
type outbound struct {
	slots   *slots
	limiter *rate.Limiter
	sent    atomic.Int64
}

func newOutbound(n int, bytesPerSec int64) *outbound {
	burst := int(min(bytesPerSec, 1<<20))
	return &outbound{slots: newSlots(BoundRebuilds, n), limiter: rate.NewLimiter(rate.Limit(bytesPerSec), burst)}
}

// Begin implements journal.Outbound.
func (o *outbound) Begin() (func(io.Reader) io.Reader, func(), bool) {
	if !o.slots.TryAcquire() {
		return nil, nil, false
	}
	var once sync.Once
	return func(r io.Reader) io.Reader { return &limitedReader{r: r, o: o} },
		func() { once.Do(o.slots.Release) }, true
}

type limitedReader struct {
	r io.Reader
	o *outbound
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if len(p) > l.o.limiter.Burst() {
		p = p[:l.o.limiter.Burst()]
	}
	n, err := l.r.Read(p)
	if n > 0 {
		_ = l.o.limiter.WaitN(context.Background(), n)
		l.o.sent.Add(int64(n))
	}
	return n, err
}
