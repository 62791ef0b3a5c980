package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// Endpoint is one replica worker of the volume.
type Endpoint struct {
	ID         string // replica ID, as the worker reports it in "not coordinator" answers
	Address    string // host:port of the worker's listener
	ServerName string // the DNS SAN its certificate must carry
}

// Config configures a Client.
type Config struct {
	Volume    string
	Endpoints []Endpoint
	RootCAs   *x509.CertPool // the volume's CA
	// Certificates optionally presents a client certificate.
	Certificates []tls.Certificate
	Token        string
	// ClientID seeds the exactly-once session; 0 picks a random one.
	ClientID uint64
	// FencingEpoch continues a fencing epoch OpenFence returned to an
	// earlier client of the same mount session; 0: unfenced until
	// OpenFence.
	FencingEpoch uint64
	// AttemptTimeout bounds one try at one worker (default 10s).
	AttemptTimeout time.Duration
	// RetryBudget bounds all tries of one operation (default 30s).
	RetryBudget time.Duration
	// DialTimeout bounds connecting to one worker (default 3s).
	DialTimeout time.Duration
	// MaxSpan bounds the distance between the newest sequence and the oldest
	// unanswered one, so the state machine's per-session window (1024
	// results) is never exceeded (default 1000).
	MaxSpan int
	Logger  *slog.Logger
}

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	if len(cfg.Endpoints) == 0 {
		return cfg, errors.New("client config: no endpoints")
	}
	if cfg.RootCAs == nil {
		return cfg, errors.New("client config: no root CA for the volume")
	}
	for _, ep := range cfg.Endpoints {
		if ep.ID == "" || ep.Address == "" || ep.ServerName == "" {
			return cfg, fmt.Errorf("client config: endpoint %+v needs ID, Address and ServerName", ep)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.AttemptTimeout, 10*time.Second)
	def(&cfg.RetryBudget, 30*time.Second)
	def(&cfg.DialTimeout, 3*time.Second)
	if cfg.MaxSpan <= 0 || cfg.MaxSpan > 1000 {
		cfg.MaxSpan = 1000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// Client talks to one volume. See the package documentation.
type Client struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	target int
	// configured is how many of cfg.Endpoints came from the configuration;
	// those after it were learned from coordinator hints (learn.go).
	configured int
	conns      map[string]*conn
	closed     bool
	session    uint64
	nextSeq    uint64
	open       map[uint64]struct{} // sequences not yet answered
	freed      chan struct{}       // closed when sequences are answered
	epoch      uint64              // fencing epoch every call carries (fence.go)

	fenced    chan struct{} // closed at the first fenced refusal
	fenceOnce sync.Once
}

// Dial connects to the volume and registers an exactly-once session.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	full, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:    full,
		log:    full.Logger.With("volume", full.Volume),
		conns:  map[string]*conn{},
		open:   map[uint64]struct{}{},
		freed:  make(chan struct{}),
		fenced: make(chan struct{}),
	}
	c.epoch = full.FencingEpoch
	c.configured = len(full.Endpoints)
	c.session = full.ClientID
	if c.session == 0 {
		c.session = randomID()
	}
	if err := c.register(ctx, c.session); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func randomID() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// ClientID is the current exactly-once session identity.
func (c *Client) ClientID() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// Coordinator returns the ID of the worker the client currently talks to.
func (c *Client) Coordinator() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Endpoints[c.target].ID
}

// Close drops every stream. In-flight calls fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := c.conns
	c.conns = map[string]*conn{}
	c.mu.Unlock()
	for _, cn := range conns {
		cn.close()
	}
	return nil
}

func (c *Client) register(ctx context.Context, session uint64) error {
	_, err := c.attempts(ctx, []wire.Op{{Kind: wire.KindRegister, Session: session}}, true)
	if err != nil {
		return fmt.Errorf("register exactly-once session %x: %w", session, err)
	}
	return nil
}

// stamp assigns sequences to mutations under the current session, waiting
// while the span of unanswered sequences would exceed MaxSpan.
func (c *Client) stamp(ctx context.Context, ops []wire.Op) error {
	if len(ops) > c.cfg.MaxSpan {
		return fmt.Errorf("%w: %d operations in one call, limit %d", syscall.EINVAL, len(ops), c.cfg.MaxSpan)
	}
	for {
		c.mu.Lock()
		low := c.nextSeq + 1
		for s := range c.open {
			low = min(low, s)
		}
		if c.nextSeq+uint64(len(ops)) < low+uint64(c.cfg.MaxSpan) {
			for i := range ops {
				c.nextSeq++
				ops[i].Session = c.session
				ops[i].Seq = c.nextSeq
				ops[i].Acked = low
				ops[i].Epoch = c.epoch
				c.open[c.nextSeq] = struct{}{}
			}
			c.mu.Unlock()
			return nil
		}
		freed := c.freed
		c.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *Client) finish(ops []wire.Op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range ops {
		if ops[i].Session == c.session { // a renewed session starts afresh
			delete(c.open, ops[i].Seq)
		}
	}
	close(c.freed)
	c.freed = make(chan struct{})
}

// mutate runs mutations exactly once.
func (c *Client) mutate(ctx context.Context, ops []wire.Op) ([]wire.Result, error) {
	for {
		if err := c.stamp(ctx, ops); err != nil {
			return nil, err
		}
		res, err := c.attempts(ctx, ops, true)
		c.finish(ops)
		if !errors.Is(err, errSessionGone) {
			return res, err
		}
		// The session was evicted before this call was ever sent: nothing
		// applied, so register a new session and try again under it.
		if err := c.renewSession(ctx, ops[0].Session); err != nil {
			return nil, err
		}
	}
}

// errSessionGone: the session expired and this call was never sent before.
var errSessionGone = errors.New("session expired before first send")

func (c *Client) renewSession(ctx context.Context, old uint64) error {
	c.mu.Lock()
	if c.session != old {
		c.mu.Unlock()
		return nil
	}
	c.session = randomID()
	c.nextSeq = 0
	c.open = map[uint64]struct{}{}
	id := c.session
	c.mu.Unlock()
	c.log.Warn("exactly-once session expired, registering a new one", "old", old, "new", id)
	return c.register(ctx, id)
}

func (c *Client) query(ctx context.Context, op wire.Op) (wire.Result, error) {
	op.Epoch = c.Epoch()
	res, err := c.attempts(ctx, []wire.Op{op}, false)
	if err != nil {
		return wire.Result{}, err
	}
	return res[0], nil
}

// attempts sends one call until it gets an authoritative answer, following
// coordinator changes, within the retry budget.
func (c *Client) attempts(ctx context.Context, ops []wire.Op, mutation bool) ([]wire.Result, error) {
	deadline := time.Now().Add(c.cfg.RetryBudget)
	maybeSent := false
	backoff := 10 * time.Millisecond
	var last error
	for {
		if c.isFenced() {
			err := c.markFenced("an earlier call was refused")
			if mutation && maybeSent {
				// An earlier send may have committed before the fence.
				err = fmt.Errorf("%w: %w", ErrUncertain, err)
			}
			return nil, err
		}
		if last != nil && time.Now().After(deadline) {
			return nil, c.giveUp(mutation, maybeSent, last)
		}
		cn, err := c.current(ctx)
		if err == nil {
			var rep wire.Reply
			var written bool
			earlier := maybeSent
			rep, written, err = cn.roundTrip(ctx, ops, c.cfg.AttemptTimeout)
			maybeSent = maybeSent || written
			if err == nil {
				res, retry, ferr := c.outcome(rep, ops, mutation, earlier)
				if !retry {
					return res, ferr
				}
				err = ferr
				if rep.Status == wire.StatusNotCoordinator && c.follow(rep) {
					last = err
					continue // a fresh hint: try it at once
				}
			} else {
				c.drop(cn)
			}
		}
		last = err
		if cerr := ctx.Err(); cerr != nil {
			return nil, c.giveUp(mutation, maybeSent, cerr)
		}
		if errors.Is(err, ErrUnauthorized) {
			return nil, err
		}
		if time.Now().Add(backoff).After(deadline) {
			return nil, c.giveUp(mutation, maybeSent, last)
		}
		c.rotate()
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, c.giveUp(mutation, maybeSent, ctx.Err())
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

func (c *Client) giveUp(mutation, maybeSent bool, last error) error {
	if mutation && maybeSent {
		return fmt.Errorf("%w (last error: %v)", ErrUncertain, last)
	}
	return fmt.Errorf("%w (last error: %v)", ErrUnavailable, last)
}

// outcome interprets a reply: final results, or whether to retry.
//
// earlier reports whether a previous send of this call may have reached a
// coordinator. The state machine checks the session before anything else,
// so an expired-session answer proves only that this send did not apply.
func (c *Client) outcome(rep wire.Reply, ops []wire.Op, mutation bool, earlier bool) ([]wire.Result, bool, error) {
	switch rep.Status {
	case wire.StatusOK:
		if len(rep.Results) != len(ops) {
			return nil, false, fmt.Errorf("%w: %d results for %d operations", ErrProtocol, len(rep.Results), len(ops))
		}
		return rep.Results, false, nil
	case wire.StatusNotCoordinator:
		// Nothing applied here; the call was not proposed.
		return nil, true, fmt.Errorf("worker is not the coordinator (coordinator %q)", rep.LeaderID)
	case wire.StatusUncertain:
		return nil, true, fmt.Errorf("outcome uncertain at the coordinator: %s", rep.Message)
	case wire.StatusUnavailable:
		return nil, true, fmt.Errorf("worker unavailable: %s", rep.Message)
	case wire.StatusSessionExpired:
		if !mutation {
			return nil, false, fmt.Errorf("%w: %s", ErrProtocol, rep.Message)
		}
		if earlier {
			return nil, false, fmt.Errorf("%w: %w: %s", ErrUncertain, ErrSessionExpired, rep.Message)
		}
		return nil, false, errSessionGone
	case wire.StatusUnauthorized:
		return nil, false, fmt.Errorf("%w: %s", ErrUnauthorized, rep.Message)
	case wire.StatusFenced:
		// Final: the epoch never comes back. Nothing of this call applied.
		return nil, false, c.markFenced(rep.Message)
	default:
		return nil, false, fmt.Errorf("%w: %s: %s", ErrProtocol, rep.Status, rep.Message)
	}
}
