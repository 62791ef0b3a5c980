// Package storageload drives storagesim (test/storagesim), the storage
// qualification's workload, from outside the volume: writers request
// checksummed record appends and small files continuously, every operation
// the fixture acknowledges goes into a ledger kept here (never on the volume),
// every failure is counted, and Verify asks a fixture on the same volume to
// read every acknowledged operation back.
//
// Like package load, it sees the volume only the way an application does.
package storageload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellfleet/cellfleet/test/storagesim/api"
)

// Ledger is every acknowledged operation, safe for concurrent use.
type Ledger struct {
	mu  sync.Mutex
	req api.VerifyRequest
}

func (l *Ledger) record(a api.Ack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := api.Entry{Seq: a.Seq, CRC: a.CRC}
	if a.Kind == api.KindFile {
		l.req.Files = append(l.req.Files, e)
	} else {
		l.req.Records = append(l.req.Records, e)
	}
}

// Len is the number of acknowledged operations.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.req.Records) + len(l.req.Files)
}

func (l *Ledger) snapshot() api.VerifyRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return api.VerifyRequest{Records: append([]api.Entry(nil), l.req.Records...), Files: append([]api.Entry(nil), l.req.Files...)}
}

// Stats are what the writers saw: operations attempted, acknowledged, and
// failed (an answer other than 200, or no answer), and the last failure.
type Stats struct {
	Attempted, Acknowledged, Failed int64
	LastFailure                     string
}

// Generator writes through one fixture until stopped.
type Generator struct {
	base   string
	client *http.Client
	ledger *Ledger

	attempts, acked, failed atomic.Int64
	mu                      sync.Mutex
	lastFailure             string
	cancel                  context.CancelFunc
	done                    sync.WaitGroup
}

// Start runs two writers against the fixture at base: one appends records,
// one creates files, each pausing between operations.
func Start(base string, ledger *Ledger, pause time.Duration) *Generator {
	ctx, cancel := context.WithCancel(context.Background())
	g := &Generator{base: base, ledger: ledger, cancel: cancel,
		client: &http.Client{Timeout: 10 * time.Second}}
	for _, path := range []string{api.PathAppend, api.PathFile} {
		g.done.Go(func() { g.write(ctx, path, pause) })
	}
	return g
}

func (g *Generator) write(ctx context.Context, path string, pause time.Duration) {
	for n := 0; ctx.Err() == nil; n++ {
		payload := fmt.Appendf(nil, "%s %d %d ", path, n, time.Now().UnixNano())
		payload = append(payload, bytes.Repeat([]byte{byte('a' + n%26)}, 200+n%300)...)
		g.attempts.Add(1)
		ack, err := g.op(ctx, path, payload)
		switch {
		case err == nil:
			g.acked.Add(1)
			g.ledger.record(ack)
		case ctx.Err() == nil:
			g.failed.Add(1)
			g.mu.Lock()
			g.lastFailure = err.Error()
			g.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// op is one operation; it returns the Ack only when the fixture acknowledged
// exactly this payload.
func (g *Generator) op(ctx context.Context, path string, payload []byte) (api.Ack, error) {
	var ack api.Ack
	err := post(ctx, g.client, g.base+path, payload, &ack)
	if err == nil && ack.CRC != api.Checksum(payload) {
		return ack, fmt.Errorf("%s %d acknowledged checksum %08x, sent %08x", ack.Kind, ack.Seq, ack.CRC, api.Checksum(payload))
	}
	return ack, err
}

// Stop ends the load and waits for the operations in flight to be answered.
func (g *Generator) Stop() {
	g.cancel()
	g.done.Wait()
}

// Stats reports the writers' counters so far.
func (g *Generator) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{Attempted: g.attempts.Load(), Acknowledged: g.acked.Load(), Failed: g.failed.Load(), LastFailure: g.lastFailure}
}

// WaitAcknowledged blocks until n more operations than at the call were
// acknowledged, or ctx ends: proof the volume serves writes right now.
func (g *Generator) WaitAcknowledged(ctx context.Context, n int64) error {
	target := g.acked.Load() + n
	for g.acked.Load() < target {
		select {
		case <-ctx.Done():
			return fmt.Errorf("acknowledged %d of %d further operations: %w", g.acked.Load()-target+n, n, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// WaitFailing blocks until an operation fails after the call, or ctx ends.
func (g *Generator) WaitFailing(ctx context.Context) error {
	target := g.failed.Load() + 1
	for g.failed.Load() < target {
		select {
		case <-ctx.Done():
			return fmt.Errorf("no operation failed: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Verify asks the fixture at base to read every acknowledged operation of
// the ledger back from its volume.
func Verify(ctx context.Context, base string, ledger *Ledger) (api.VerifyReport, error) {
	b, err := json.Marshal(ledger.snapshot())
	if err != nil {
		return api.VerifyReport{}, fmt.Errorf("encode the ledger: %w", err)
	}
	var rep api.VerifyReport
	err = post(ctx, &http.Client{Timeout: 2 * time.Minute}, base+api.PathVerify, b, &rep)
	return rep, err
}

// FixtureStats and Statfs read the fixture's counters and its volume's size.
func FixtureStats(ctx context.Context, base string) (api.Stats, error) {
	var s api.Stats
	return s, get(ctx, base+api.PathStats, &s)
}

func Statfs(ctx context.Context, base string) (api.Statfs, error) {
	var s api.Statfs
	return s, get(ctx, base+api.PathStatfs, &s)
}

func get(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	return do(&http.Client{Timeout: 10 * time.Second}, req, out)
}

func post(ctx context.Context, c *http.Client, url string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	return do(c, req, out)
}

func do(c *http.Client, req *http.Request, out any) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", req.Method, req.URL.Path, err)
	}
	return nil
}
