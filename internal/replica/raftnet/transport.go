package raftnet

// The client half: pooled connections to each peer, one request and its
// response at a time per connection (pipelines keep their own connection),
// as raft's NetworkTransport does, so raft sees the same concurrency and
// back-pressure it was written for.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/recordbatch"
)

const (
	// bufferSize is each connection's read and write buffer: a multiple of
	// TLS's 16 KiB record, so a flushed buffer is whole records.
	bufferSize = 256 << 10
	// defaultMaxInFlight is raft's DefaultMaxRPCsInFlight.
	defaultMaxInFlight = 2
	// timeoutScale is raft's: a snapshot's deadline grows by Timeout per
	// this many bytes.
	timeoutScale = 256 << 10
)

// ErrVersionMismatch: the peer speaks another raft transport.
var ErrVersionMismatch = errors.New("raft peer speaks another transport version")

// Config configures a Transport.
type Config struct {
	Stream raft.StreamLayer
	// ServerAddressProvider, when set, overrides the address raft passes.
	ServerAddressProvider raft.ServerAddressProvider
	Limits                Limits
	MaxPool               int           // idle connections kept per peer
	MaxInFlight           int           // pipelined requests per follower; < 2 disables pipelining
	Timeout               time.Duration // I/O deadline per request
	Logger                *slog.Logger
	// BeforeEntries, when set, is called on the receiving side before the
	// entries of an AppendEntries request are allocated and read, with
	// their payload's size. It may wait, until ctx ends (at Timeout or
	// Close), for the replica to make room for them; the connection's
	// sender waits meanwhile. Its error refuses the request and closes the
	// connection. Requests without entries (heartbeats) never call it.
	BeforeEntries func(ctx context.Context, payload int64) error
}

// Transport implements raft.Transport, raft.WithClose and raft.WithPreVote.
// (raft.WithPeers is for loopback transports; raft's NetworkTransport does
// not implement it either.)
type Transport struct {
	cfg  Config
	log  *slog.Logger
	mp   *codec.MsgpackHandle
	cons chan raft.RPC

	heartbeatMu sync.Mutex
	heartbeat   func(raft.RPC)

	poolMu sync.Mutex
	pool   map[raft.ServerAddress][]*conn

	inMu    sync.Mutex
	inbound map[net.Conn]struct{}

	shutdownMu sync.Mutex
	shutdown   chan struct{}
	stopped    context.Context // ends at Close, for BeforeEntries
	stop       context.CancelFunc
	closed     bool
	wg         sync.WaitGroup
}

var (
	_ raft.Transport   = (*Transport)(nil)
	_ raft.WithClose   = (*Transport)(nil)
	_ raft.WithPreVote = (*Transport)(nil)
)

// New starts a transport accepting on cfg.Stream.
func New(cfg Config) (*Transport, error) {
	if cfg.Stream == nil {
		return nil, errors.New("raft transport needs a stream layer")
	}
	if err := cfg.Limits.validate(); err != nil {
		return nil, err
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = defaultMaxInFlight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// TimeNotBuiltin as raft's NetworkTransport sets it by default: the
	// msgpack RPCs encode exactly as raft's own.
	mp := &codec.MsgpackHandle{}
	mp.TimeNotBuiltin = true
	t := &Transport{cfg: cfg, log: cfg.Logger, mp: mp,
		cons: make(chan raft.RPC), pool: map[raft.ServerAddress][]*conn{},
		inbound: map[net.Conn]struct{}{}, shutdown: make(chan struct{})}
	t.stopped, t.stop = context.WithCancel(context.Background())
	t.wg.Add(1)
	go t.listen()
	return t, nil
}

// conn is one connection to a peer.
type conn struct {
	target raft.ServerAddress
	c      net.Conn
	r      *bufio.Reader
	w      *bufio.Writer
	dec    *codec.Decoder
	enc    *codec.Encoder
	// answered: the peer's version byte has been read and matched.
	answered bool
}

func (c *conn) release() { _ = c.c.Close() }

// checkVersion reads the peer's version byte before its first response.
func (c *conn) checkVersion() error {
	if c.answered {
		return nil
	}
	b, err := c.r.ReadByte()
	if err != nil {
		return fmt.Errorf("raft peer %s closed the stream before answering transport version %#x (a replica running another transport?): %w", c.target, byte(Version1), err)
	}
	if Version(b) != Version1 {
		return fmt.Errorf("%w: %s answered %#x, this replica speaks %#x", ErrVersionMismatch, c.target, b, byte(Version1))
	}
	c.answered = true
	return nil
}

func (t *Transport) isShutdown() bool {
	select {
	case <-t.shutdown:
		return true
	default:
		return false
	}
}

func (t *Transport) address(id raft.ServerID, target raft.ServerAddress) raft.ServerAddress {
	if t.cfg.ServerAddressProvider == nil {
		return target
	}
	a, err := t.cfg.ServerAddressProvider.ServerAddr(id)
	if err != nil {
		t.log.Warn("no address for raft peer; using raft's", "peer", id, "fallback", target, "error", err)
		return target
	}
	return a
}

// getConn takes a pooled connection or dials one, which opens with this
// transport's version byte (sent with the first request).
func (t *Transport) getConn(id raft.ServerID, target raft.ServerAddress) (*conn, error) {
	if t.isShutdown() {
		return nil, raft.ErrTransportShutdown
	}
	addr := t.address(id, target)
	t.poolMu.Lock()
	if cs := t.pool[addr]; len(cs) > 0 {
		c := cs[len(cs)-1]
		cs[len(cs)-1] = nil
		t.pool[addr] = cs[:len(cs)-1]
		t.poolMu.Unlock()
		return c, nil
	}
	t.poolMu.Unlock()
	nc, err := t.cfg.Stream.Dial(addr, t.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	c := &conn{target: addr, c: nc, r: bufio.NewReaderSize(nc, bufferSize), w: bufio.NewWriterSize(nc, bufferSize)}
	c.dec = codec.NewDecoder(c.r, t.mp)
	c.enc = codec.NewEncoder(c.w, t.mp)
	if err := c.w.WriteByte(byte(Version1)); err != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

func (t *Transport) returnConn(c *conn) {
	t.poolMu.Lock()
	defer t.poolMu.Unlock()
	if cs := t.pool[c.target]; !t.isShutdown() && len(cs) < t.cfg.MaxPool {
		t.pool[c.target] = append(cs, c)
		return
	}
	c.release()
}

// send writes one request and flushes it; a failed write loses the
// connection.
func (t *Transport) send(c *conn, typ rpcType, args any) error {
	err := recordbatch.Batch(c.c, func() error {
		var err error
		if req, ok := args.(*raft.AppendEntriesRequest); ok && typ == rpcAppendEntries {
			err = writeAppendEntries(c.w, req, t.cfg.Limits)
		} else if err = c.w.WriteByte(byte(typ)); err == nil {
			err = c.enc.Encode(args)
		}
		if err == nil {
			err = c.w.Flush()
		}
		return err
	})
	if err != nil {
		c.release()
		return fmt.Errorf("send raft request to %s: %w", c.target, err)
	}
	return nil
}

// receive reads one response: raft's error string, then the response, both
// msgpack. It reports whether the connection may be reused.
func receive(c *conn, resp any) (bool, error) {
	if err := c.checkVersion(); err != nil {
		c.release()
		return false, err
	}
	var rpcErr string
	if err := c.dec.Decode(&rpcErr); err != nil {
		c.release()
		return false, fmt.Errorf("read raft response from %s: %w", c.target, err)
	}
	if err := c.dec.Decode(resp); err != nil {
		c.release()
		return false, fmt.Errorf("read raft response from %s: %w", c.target, err)
	}
	if rpcErr != "" {
		return true, errors.New(rpcErr)
	}
	return true, nil
}

func (t *Transport) call(id raft.ServerID, target raft.ServerAddress, typ rpcType, args, resp any) error {
	c, err := t.getConn(id, target)
	if err != nil {
		return err
	}
	if t.cfg.Timeout > 0 {
		_ = c.c.SetDeadline(time.Now().Add(t.cfg.Timeout))
	}
	if err := t.send(c, typ, args); err != nil {
		return err
	}
	reuse, err := receive(c, resp)
	if reuse {
		t.returnConn(c)
	}
	return err
}

// Consumer implements raft.Transport.
func (t *Transport) Consumer() <-chan raft.RPC { return t.cons }

// LocalAddr implements raft.Transport.
func (t *Transport) LocalAddr() raft.ServerAddress {
	return raft.ServerAddress(t.cfg.Stream.Addr().String())
}

// AppendEntries implements raft.Transport.
func (t *Transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.call(id, target, rpcAppendEntries, args, resp)
}

// RequestVote implements raft.Transport.
func (t *Transport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.call(id, target, rpcRequestVote, args, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (t *Transport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.call(id, target, rpcRequestPreVote, args, resp)
}

// TimeoutNow implements raft.Transport.
func (t *Transport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.call(id, target, rpcTimeoutNow, args, resp)
}

// InstallSnapshot implements raft.Transport: the request, then the
// checkpoint's bytes on the same connection, which is closed afterwards
// (its state is unknown after an error part-way).
func (t *Transport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	c, err := t.getConn(id, target)
	if err != nil {
		return err
	}
	defer c.release()
	if t.cfg.Timeout > 0 {
		d := max(t.cfg.Timeout, t.cfg.Timeout*time.Duration(args.Size/timeoutScale))
		_ = c.c.SetDeadline(time.Now().Add(d))
	}
	if err := c.w.WriteByte(byte(rpcInstallSnapshot)); err != nil {
		return fmt.Errorf("send checkpoint to %s: %w", c.target, err)
	}
	if err := c.enc.Encode(args); err != nil {
		return fmt.Errorf("send checkpoint to %s: %w", c.target, err)
	}
	if _, err := io.Copy(c.w, data); err != nil {
		return fmt.Errorf("send checkpoint to %s: %w", c.target, err)
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("send checkpoint to %s: %w", c.target, err)
	}
	_, err = receive(c, resp)
	return err
}

// EncodePeer implements raft.Transport.
func (t *Transport) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	return []byte(t.address(id, addr))
}

// DecodePeer implements raft.Transport.
func (t *Transport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// SetHeartbeatHandler implements raft.Transport: heartbeats bypass the
// consumer so a follower busy with a slow append still answers them.
func (t *Transport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.heartbeatMu.Lock()
	defer t.heartbeatMu.Unlock()
	t.heartbeat = cb
}

// Close implements raft.WithClose: it stops accepting, closes the stream
// layer, every pooled and every inbound connection, and waits for the
// accept loop.
func (t *Transport) Close() error {
	t.shutdownMu.Lock()
	if t.closed {
		t.shutdownMu.Unlock()
		return nil
	}
	t.closed = true
	close(t.shutdown)
	t.stop()
	t.shutdownMu.Unlock()
	err := t.cfg.Stream.Close()
	t.poolMu.Lock()
	for a, cs := range t.pool {
		for _, c := range cs {
			c.release()
		}
		delete(t.pool, a)
	}
	t.poolMu.Unlock()
	t.inMu.Lock()
	for c := range t.inbound {
		_ = c.Close()
	}
	t.inMu.Unlock()
	t.wg.Wait()
	return err
}
