package mux

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/recordbatch"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// Handler serves one decoded call. A mutation's handler may build its log
// entry in the call's buffer (wire.EntryInPlace).
type Handler func(ctx context.Context, call *wire.Call) wire.Reply

// RPCServer serves client streams: a hello with the bearer token, then
// multiplexed calls answered concurrently.
type RPCServer struct {
	// Credentials hold the bearer token, read at each hello
	// (credentials.go): a stream already admitted stays admitted.
	Credentials *CredentialSet
	Handler     Handler
	// PerConn bounds concurrent calls on one stream (default 128); further
	// frames wait in the socket, which pushes back on the client.
	PerConn int
	// IdleTimeout closes a stream with no frame for this long (default 10m).
	IdleTimeout time.Duration
	Logger      *slog.Logger

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ServeConn serves one stream until it closes.
func (s *RPCServer) ServeConn(c net.Conn) {
	if !s.track(c) {
		c.Close()
		return
	}
	defer s.untrack(c)
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("remote", c.RemoteAddr().String())
	if !s.hello(c, log) {
		return
	}
	perConn := s.PerConn
	if perConn <= 0 {
		perConn = 128
	}
	idle := s.IdleTimeout
	if idle <= 0 {
		idle = 10 * time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wmu sync.Mutex
	send := func(frame []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if err := recordbatch.Batch(c, func() error { return wire.WritePrefixed(c, frame) }); err != nil {
			c.Close()
		}
	}
	sem := make(chan struct{}, perConn)
	var calls sync.WaitGroup
	defer calls.Wait()
	for {
		_ = c.SetReadDeadline(time.Now().Add(idle))
		buf, err := wire.ReadCallFrame(c, wire.MaxFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Warn("client stream closed on a bad frame", "error", err)
				if errors.Is(err, wire.ErrMalformed) {
					send(wire.ReplyFrame(wire.FrameReply, &wire.Reply{Status: wire.StatusBadRequest, Message: clip(err.Error())}))
				}
			}
			return
		}
		call, err := wire.DecodeCallFrame(buf)
		if err != nil {
			log.Warn("malformed call rejected; nothing applied", "error", err)
			send(wire.ReplyFrame(wire.FrameReply, &wire.Reply{ID: call.ID, Status: wire.StatusBadRequest, Message: clip(err.Error())}))
			return
		}
		sem <- struct{}{}
		calls.Add(1)
		go func() {
			defer func() { <-sem; calls.Done() }()
			rep := s.Handler(ctx, &call)
			rep.ID = call.ID
			rep.Message = clip(rep.Message)
			send(wire.ReplyFrame(wire.FrameReply, &rep))
			// The frame may lie in the read's pooled buffer: it is free
			// once written (TLS has encrypted it into its own records).
			rep.Release()
		}()
	}
}

func (s *RPCServer) hello(c net.Conn, log *slog.Logger) bool {
	_ = c.SetDeadline(time.Now().Add(HandshakeTimeout))
	defer c.SetDeadline(time.Time{})
	body, err := wire.ReadFrame(c, wire.MaxToken+64)
	if err != nil {
		log.Warn("client stream without a valid hello rejected", "error", err)
		if errors.Is(err, wire.ErrMalformed) {
			_ = wire.WriteFrame(c, wire.AppendReply(wire.FrameHelloReply, &wire.Reply{Status: wire.StatusBadRequest, Message: clip(err.Error())}))
		}
		return false
	}
	h, err := wire.DecodeHello(body)
	if err != nil {
		_ = wire.WriteFrame(c, wire.AppendReply(wire.FrameHelloReply, &wire.Reply{Status: wire.StatusBadRequest, Message: clip(err.Error())}))
		return false
	}
	if subtle.ConstantTimeCompare([]byte(h.Token), []byte(s.Credentials.Load().Token)) != 1 {
		log.Warn("client stream with a wrong bearer token rejected")
		_ = wire.WriteFrame(c, wire.AppendReply(wire.FrameHelloReply, &wire.Reply{Status: wire.StatusUnauthorized, Message: "bearer token rejected"}))
		return false
	}
	return wire.WriteFrame(c, wire.AppendReply(wire.FrameHelloReply, &wire.Reply{Status: wire.StatusOK})) == nil
}

func clip(s string) string {
	if len(s) > wire.MaxMessage {
		return s[:wire.MaxMessage]
	}
	return s
}

func (s *RPCServer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *RPCServer) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// Close closes every stream and waits for their calls to end.
func (s *RPCServer) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
