package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/recordbatch"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// errConnBroken marks a stream failure after which a sent call's outcome is
// unknown.
var errConnBroken = errors.New("stream to worker broken")

// conn is one authenticated, multiplexed stream to one worker.
type conn struct {
	ep  Endpoint
	tc  *tls.Conn
	wmu sync.Mutex

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan wire.Reply
	err     error
	done    chan struct{}
}

func dialConn(ctx context.Context, cfg *Config, ep Endpoint, clientID uint64) (*conn, error) {
	tcfg := &tls.Config{
		RootCAs:      cfg.RootCAs,
		Certificates: cfg.Certificates,
		ServerName:   ep.ServerName,
		NextProtos:   []string{wire.ProtoRPC},
		MinVersion:   tls.VersionTLS13,
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	tc, err := recordbatch.DialTLS(dctx, &net.Dialer{Timeout: cfg.DialTimeout}, ep.Address, tcfg)
	if err != nil {
		return nil, fmt.Errorf("dial worker %s at %s: %w", ep.ID, ep.Address, err)
	}
	if tc.ConnectionState().NegotiatedProtocol != wire.ProtoRPC {
		tc.Close()
		return nil, fmt.Errorf("worker %s at %s does not speak %s", ep.ID, ep.Address, wire.ProtoRPC)
	}
	_ = tc.SetDeadline(time.Now().Add(cfg.DialTimeout))
	if err := wire.WriteFrame(tc, wire.AppendHello(&wire.Hello{Token: cfg.Token, ClientID: clientID})); err != nil {
		tc.Close()
		return nil, fmt.Errorf("hello to worker %s: %w", ep.ID, err)
	}
	body, err := wire.ReadFrame(tc, wire.MaxFrame)
	if err != nil {
		tc.Close()
		return nil, fmt.Errorf("hello reply from worker %s: %w", ep.ID, err)
	}
	_, rep, err := wire.DecodeReply(body)
	if err != nil {
		tc.Close()
		return nil, fmt.Errorf("hello reply from worker %s: %w", ep.ID, err)
	}
	if rep.Status == wire.StatusUnauthorized {
		tc.Close()
		return nil, fmt.Errorf("worker %s: %s: %w", ep.ID, rep.Message, ErrUnauthorized)
	}
	if rep.Status != wire.StatusOK {
		tc.Close()
		return nil, fmt.Errorf("worker %s refused the stream: %s (%s)", ep.ID, rep.Status, rep.Message)
	}
	_ = tc.SetDeadline(time.Time{})
	c := &conn{ep: ep, tc: tc, pending: map[uint64]chan wire.Reply{}, done: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

func (c *conn) readLoop() {
	for {
		body, err := wire.ReadFrame(c.tc, wire.MaxFrame)
		if err != nil {
			c.fail(fmt.Errorf("%w: %v", errConnBroken, err))
			return
		}
		_, rep, err := wire.DecodeReply(body)
		if err != nil {
			c.fail(fmt.Errorf("%w: %v", errConnBroken, err))
			return
		}
		owned := lendBody(&rep, body)
		c.mu.Lock()
		ch := c.pending[rep.ID]
		delete(c.pending, rep.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- rep
		} else if owned {
			rep.Release()
		}
	}
}

// lendBody decides who owns a reply's pooled frame body (wire.ReadFrame):
// only result data aliases it (strings are copied), so a reply without data
// returns it at once; a one-result reply with data (a read) hands it to the
// result's Frame, which Client.ReadFrame's caller returns after use. Bodies
// of other shapes are left to the collector. owned reports the hand-over.
func lendBody(rep *wire.Reply, body []byte) (owned bool) {
	data := 0
	for i := range rep.Results {
		if len(rep.Results[i].Data) > 0 {
			data++
		}
	}
	switch {
	case data == 0:
		wire.PutBuf(body)
	case len(rep.Results) == 1:
		rep.Results[0].Frame = body
		return true
	}
	return false
}

func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
	c.pending = map[uint64]chan wire.Reply{}
	c.mu.Unlock()
	c.tc.Close()
}

func (c *conn) broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// roundTrip sends one call. written reports whether any byte of the call may
// have reached the worker (the outcome of a mutation is then unknown unless
// a reply arrives).
func (c *conn) roundTrip(ctx context.Context, ops []wire.Op, timeout time.Duration) (rep wire.Reply, written bool, err error) {
	ch := make(chan wire.Reply, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return rep, false, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	frame := wire.PooledCallFrame(&wire.Call{ID: id, Ops: ops})
	c.wmu.Lock()
	_ = c.tc.SetWriteDeadline(time.Now().Add(timeout))
	err = recordbatch.Batch(c.tc, func() error { return wire.WritePrefixed(c.tc, frame) })
	c.wmu.Unlock()
	// crypto/tls has sealed the bytes into its own records by now.
	wire.PutBuf(frame)
	if err != nil {
		forget()
		c.fail(fmt.Errorf("%w: %v", errConnBroken, err))
		return rep, true, fmt.Errorf("%w: %v", errConnBroken, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case rep = <-ch:
		return rep, true, nil
	case <-c.done:
		return rep, true, c.err
	case <-t.C:
		forget()
		// A worker that does not answer within the attempt timeout is
		// treated as gone: drop the stream so the next attempt re-resolves
		// the coordinator.
		c.fail(fmt.Errorf("%w: no reply within %s", errConnBroken, timeout))
		return rep, true, fmt.Errorf("%w: no reply within %s", errConnBroken, timeout)
	case <-ctx.Done():
		forget()
		return rep, true, ctx.Err()
	}
}

func (c *conn) close() { c.fail(ErrClosed) }
