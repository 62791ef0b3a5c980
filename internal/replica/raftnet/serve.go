package raftnet

//lint:file-ignore SA1019 raft still sends and reads AppendEntriesRequest.Leader (a follower uses it when RPCHeader.Addr is empty), so the frame carries it.

// The server half: each accepted connection is served by one goroutine that
// reads a request, hands it to raft (or to the heartbeat handler) and writes
// raft's answer, in order, as raft's NetworkTransport does.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

func (t *Transport) listen() {
	defer t.wg.Done()
	const baseDelay, maxDelay = 5 * time.Millisecond, time.Second
	var delay time.Duration
	for {
		c, err := t.cfg.Stream.Accept()
		if err != nil {
			if t.isShutdown() {
				return
			}
			delay = min(max(2*delay, baseDelay), maxDelay)
			t.log.Error("raft transport failed to accept a connection", "error", err)
			select {
			case <-t.shutdown:
				return
			case <-time.After(delay):
				continue
			}
		}
		delay = 0
		if !t.track(c) {
			_ = c.Close()
			return
		}
		go t.serveConn(c)
	}
}

// track records an inbound connection so Close can end it; false once the
// transport is shut down.
func (t *Transport) track(c net.Conn) bool {
	t.inMu.Lock()
	defer t.inMu.Unlock()
	if t.isShutdown() {
		return false
	}
	t.inbound[c] = struct{}{}
	return true
}

func (t *Transport) untrack(c net.Conn) {
	t.inMu.Lock()
	delete(t.inbound, c)
	t.inMu.Unlock()
	_ = c.Close()
}

func (t *Transport) serveConn(nc net.Conn) {
	defer t.untrack(nc)
	r := bufio.NewReaderSize(nc, bufferSize)
	w := bufio.NewWriter(nc)
	first, err := r.ReadByte()
	if err != nil {
		return
	}
	// Answer with this transport's version whatever the peer sent, so a
	// peer of a later version can say which versions met.
	_ = w.WriteByte(byte(Version1))
	if Version(first) != Version1 {
		// Logged before the answer leaves: the peer acts on the answer, and
		// whoever reads this log after the peer's failure finds the reason.
		t.log.Error("raft peer refused: it speaks another transport version (raft's NetworkTransport starts with 0 to 4)",
			"remote", nc.RemoteAddr().String(), "peerVersion", fmt.Sprintf("%#x", first), "version", fmt.Sprintf("%#x", byte(Version1)))
		_ = w.Flush()
		return
	}
	dec := codec.NewDecoder(r, t.mp)
	enc := codec.NewEncoder(w, t.mp)
	for {
		if err := t.serveRequest(r, dec, enc); err != nil {
			if !errors.Is(err, io.EOF) && !t.isShutdown() && !errors.Is(err, net.ErrClosed) {
				t.log.Error("raft request refused; connection closed", "remote", nc.RemoteAddr().String(), "error", err)
			}
			return
		}
		if err := w.Flush(); err != nil {
			if !t.isShutdown() {
				t.log.Error("raft response not sent", "remote", nc.RemoteAddr().String(), "error", err)
			}
			return
		}
	}
}

// serveRequest reads, dispatches and answers one request.
func (t *Transport) serveRequest(r *bufio.Reader, dec *codec.Decoder, enc *codec.Encoder) error {
	typ, err := r.ReadByte()
	if err != nil {
		return err
	}
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{RespChan: respCh}
	heartbeat := false
	switch rpcType(typ) {
	case rpcAppendEntries:
		req, err := readAppendEntries(r, t.cfg.Limits, t.admitEntries)
		if err != nil {
			return fmt.Errorf("append entries: %w", err)
		}
		rpc.Command = req
		heartbeat = isHeartbeat(req)
	case rpcRequestVote:
		rpc.Command, err = decode[raft.RequestVoteRequest](dec)
	case rpcRequestPreVote:
		rpc.Command, err = decode[raft.RequestPreVoteRequest](dec)
	case rpcTimeoutNow:
		rpc.Command, err = decode[raft.TimeoutNowRequest](dec)
	case rpcInstallSnapshot:
		var req *raft.InstallSnapshotRequest
		if req, err = decode[raft.InstallSnapshotRequest](dec); err == nil {
			rpc.Command = req
			rpc.Reader = io.LimitReader(r, req.Size)
		}
	default:
		return fmt.Errorf("%w: unknown request type %d", ErrMalformedFrame, typ)
	}
	if err != nil {
		return fmt.Errorf("decode raft request type %d: %w", typ, err)
	}
	if !heartbeat || !t.fastHeartbeat(rpc) {
		select {
		case t.cons <- rpc:
		case <-t.shutdown:
			return raft.ErrTransportShutdown
		}
	}
	select {
	case resp := <-respCh:
		msg := ""
		if resp.Error != nil {
			msg = resp.Error.Error()
		}
		if err := enc.Encode(msg); err != nil {
			return err
		}
		return enc.Encode(resp.Response)
	case <-t.shutdown:
		return raft.ErrTransportShutdown
	}
}

func decode[T any](dec *codec.Decoder) (*T, error) {
	var v T
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return &v, nil
}

// isHeartbeat is raft's NetworkTransport's test: a heartbeat carries a term
// and the leader's address and nothing else.
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	leader := req.Addr
	if len(leader) == 0 {
		leader = req.Leader
	}
	return req.Term != 0 && leader != nil && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

// fastHeartbeat hands a heartbeat to raft's handler, if set.
func (t *Transport) fastHeartbeat(rpc raft.RPC) bool {
	t.heartbeatMu.Lock()
	fn := t.heartbeat
	t.heartbeatMu.Unlock()
	if fn == nil {
		return false
	}
	fn(rpc)
	return true
}

// admitEntries runs BeforeEntries for one request's payload, within the
// request's deadline: a sender whose request waits longer has given up on
// it, and the connection is closed.
func (t *Transport) admitEntries(payload int64) error {
	if t.cfg.BeforeEntries == nil {
		return nil
	}
	ctx, cancel := t.stopped, context.CancelFunc(func() {})
	if t.cfg.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, t.cfg.Timeout)
	}
	defer cancel()
	if err := t.cfg.BeforeEntries(ctx, payload); err != nil {
		return fmt.Errorf("no room for %d bytes of entries: %w", payload, err)
	}
	return nil
}
