// Package load writes records continuously through a fleet's application
// Service and keeps a ledger of every write the fleet acknowledged; after a
// scenario it reads every acknowledged record back through the same Service.
//
// It speaks celldsim's record API (PUT/GET /records/{key}, 200 = acknowledged)
// and must never import Kubernetes or operator code: it only sees the fleet
// the way an application does.
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Ledger is the set of acknowledged writes, safe for concurrent use.
type Ledger struct {
	mu    sync.Mutex
	acked map[string]string
	order []string
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{acked: map[string]string{}} }

func (l *Ledger) record(key, value string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := l.acked[key]; !dup {
		l.order = append(l.order, key)
	}
	l.acked[key] = value
}

// Len is the number of acknowledged writes.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// Entries returns the acknowledged writes in acknowledgement order.
func (l *Ledger) Entries() [][2]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([][2]string, len(l.order))
	for i, k := range l.order {
		out[i] = [2]string{k, l.acked[k]}
	}
	return out
}

// Target is where the load goes: the base URL of the fleet's application
// Service and the transport that reaches it (nil: plain HTTP from this host).
type Target struct {
	Base      string
	Transport http.RoundTripper
}

// client reaches the target. Without a transport of its own, the writes use
// one connection per request, so each may land on another member; reads keep
// their connections (tens of thousands of them would otherwise exhaust this
// host's ephemeral ports).
func (t Target) client(timeout time.Duration, perRequest bool) *http.Client {
	switch {
	case t.Transport != nil:
		return &http.Client{Timeout: timeout, Transport: t.Transport}
	case perRequest:
		return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	default:
		return &http.Client{Timeout: timeout}
	}
}

// Generator writes through the fleet's Service until stopped.
type Generator struct {
	base    string // the application Service's base URL
	prefix  string
	writers int
	pause   time.Duration
	client  *http.Client
	ledger  *Ledger

	seq      atomic.Int64
	attempts atomic.Int64
	refused  atomic.Int64
	cancel   context.CancelFunc
	done     sync.WaitGroup
}

// Options shape the load.
type Options struct {
	Writers int           // concurrent writers (default 2)
	Pause   time.Duration // pause between one writer's writes (default 20ms)
	Timeout time.Duration // bound of one write (default 5s)
}

// Start begins writing keys "<prefix>-<n>" to the target and returns the
// running generator.
func Start(target Target, prefix string, ledger *Ledger, o Options) *Generator {
	if o.Writers <= 0 {
		o.Writers = 2
	}
	if o.Pause <= 0 {
		o.Pause = 20 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Generator{base: target.Base, prefix: prefix, writers: o.Writers, pause: o.Pause, ledger: ledger, cancel: cancel,
		client: target.client(o.Timeout, true)}
	for range o.Writers {
		g.done.Go(func() { g.write(ctx) })
	}
	return g
}

func (g *Generator) write(ctx context.Context) {
	for ctx.Err() == nil {
		n := g.seq.Add(1)
		key := fmt.Sprintf("%s-%07d", g.prefix, n)
		value := fmt.Sprintf("%s@%d", key, time.Now().UnixNano())
		g.attempts.Add(1)
		if err := g.put(ctx, key, value); err != nil {
			g.refused.Add(1)
		} else {
			g.ledger.record(key, value)
		}
		select {
		case <-ctx.Done():
		case <-time.After(g.pause):
		}
	}
}

// put is one write; nil means the fleet acknowledged it.
func (g *Generator) put(ctx context.Context, key, value string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, g.base+"/records/"+key, strings.NewReader(value))
	if err != nil {
		return err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("write %s: %s", key, resp.Status)
	}
	return nil
}

// Stop ends the load and waits for the writes in flight to be answered.
func (g *Generator) Stop() {
	g.cancel()
	g.done.Wait()
}

// Stats are the generator's counters.
type Stats struct{ Attempted, Acknowledged, Refused int64 }

// Stats reports what the generator did so far.
func (g *Generator) Stats() Stats {
	return Stats{Attempted: g.attempts.Load(), Acknowledged: int64(g.ledger.Len()), Refused: g.refused.Load()}
}

// WaitAcknowledged blocks until at least n more writes than at the call were
// acknowledged, or ctx ends: proof that the fleet serves writes right now.
func (g *Generator) WaitAcknowledged(ctx context.Context, n int) error {
	target := g.ledger.Len() + n
	for g.ledger.Len() < target {
		select {
		case <-ctx.Done():
			return fmt.Errorf("fleet acknowledged %d of %d further writes: %w", g.ledger.Len()-target+n, n, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Lost is an acknowledged write that could not be read back intact.
type Lost struct {
	Key, Want, Got string
	Err            error
}

// Verify reads every acknowledged record back through the target. A record counts
// as lost only after attempts reads that each failed or returned another
// value (a read may land on a member that must ask its peers).
func Verify(ctx context.Context, target Target, ledger *Ledger, attempts int) (verified int, lost []Lost) {
	client, base := target.client(5*time.Second, false), target.Base
	entries := ledger.Entries()
	var mu sync.Mutex
	work := make(chan [2]string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for e := range work {
				got, err := readBack(ctx, client, base, e[0], e[1], attempts)
				mu.Lock()
				if err != nil {
					lost = append(lost, Lost{Key: e[0], Want: e[1], Got: got, Err: err})
				} else {
					verified++
				}
				mu.Unlock()
			}
		})
	}
	for _, e := range entries {
		work <- e
	}
	close(work)
	wg.Wait()
	return verified, lost
}

func readBack(ctx context.Context, client *http.Client, base, key, want string, attempts int) (string, error) {
	var last error
	var got string
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return got, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/records/"+key, nil)
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		got = string(b)
		switch {
		case err != nil:
			last = err
		case resp.StatusCode != http.StatusOK:
			last = fmt.Errorf("read %s: %s", key, resp.Status)
		case got != want:
			return got, errors.New("read back a different value")
		default:
			return got, nil
		}
	}
	return got, last
}
