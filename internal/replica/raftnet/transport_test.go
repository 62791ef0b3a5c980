package raftnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// tcpStream is a plain TCP raft.StreamLayer on loopback: the worker's TLS
// port is tested in package mux; here the subject is the framing.
type tcpStream struct{ net.Listener }

func (s tcpStream) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(a), timeout)
}

func listenTCP(t *testing.T) tcpStream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return tcpStream{ln}
}

// logBuffer collects the transport's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newTransport(t *testing.T, logs io.Writer) *Transport {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	tr, err := New(Config{Stream: listenTCP(t), Limits: testLimits, MaxPool: 2, Timeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// answer serves tr's consumer like raft: every AppendEntries succeeds with
// its last index, votes are granted, snapshots are read to the end.
func answer(t *testing.T, tr *Transport, got chan<- raft.RPC) {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case rpc := <-tr.Consumer():
				switch req := rpc.Command.(type) {
				case *raft.AppendEntriesRequest:
					last := req.PrevLogEntry
					if n := len(req.Entries); n > 0 {
						last = req.Entries[n-1].Index
					}
					rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: last, Success: true}, nil)
				case *raft.RequestVoteRequest:
					rpc.Respond(&raft.RequestVoteResponse{Term: req.Term, Granted: true}, nil)
				case *raft.InstallSnapshotRequest:
					n, _ := io.Copy(io.Discard, rpc.Reader)
					rpc.Respond(&raft.InstallSnapshotResponse{Term: req.Term, Success: n == req.Size}, nil)
				default:
					rpc.Respond(nil, errors.New("unexpected request"))
				}
				if got != nil {
					got <- rpc
				}
			case <-stop:
				return
			}
		}
	}()
}

func entries(first uint64, n, size int) []*raft.Log {
	var out []*raft.Log
	for i := range n {
		out = append(out, &raft.Log{Index: first + uint64(i), Term: 1, Type: raft.LogCommand,
			Data: bytes.Repeat([]byte{byte(i + 1)}, size), AppendedAt: time.Now()})
	}
	return out
}

func TestAppendEntriesReachRaftIntactSyncAndPipelined(t *testing.T) {
	leader, follower := newTransport(t, nil), newTransport(t, nil)
	got := make(chan raft.RPC, 64)
	answer(t, follower, got)
	target := follower.LocalAddr()
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("r0"), Addr: []byte(leader.LocalAddr())},
		Term: 1, PrevLogEntry: 0, LeaderCommitIndex: 0, Entries: entries(1, 4, 1<<20)}
	var resp raft.AppendEntriesResponse
	if err := leader.AppendEntries("r1", target, req, &resp); err != nil {
		t.Fatalf("AppendEntries: %v", err)
	}
	if !resp.Success || resp.LastLog != 4 {
		t.Fatalf("response %+v, want success at index 4", resp)
	}
	sameRequest(t, "synchronous append", (<-got).Command.(*raft.AppendEntriesRequest), req)

	p, err := leader.AppendEntriesPipeline("r1", target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// raft consumes the futures on its own goroutine; so does this test.
	failed := make(chan string, 8)
	go func() {
		for range 8 {
			f := <-p.Consumer()
			if f.Error() != nil || !f.Response().Success {
				failed <- fmt.Sprintf("pipelined append failed: %v %+v", f.Error(), f.Response())
			}
		}
		close(failed)
	}()
	var sent []*raft.AppendEntriesRequest
	for i := range 8 {
		r := &raft.AppendEntriesRequest{RPCHeader: req.RPCHeader, Term: 1, PrevLogEntry: uint64(4 + i*2), PrevLogTerm: 1,
			LeaderCommitIndex: 4, Entries: entries(uint64(5+i*2), 2, 64<<10)}
		if _, err := p.AppendEntries(r, &raft.AppendEntriesResponse{}); err != nil {
			t.Fatalf("pipelined append %d: %v", i, err)
		}
		sent = append(sent, r)
	}
	for msg := range failed {
		t.Fatal(msg)
	}
	for _, r := range sent {
		sameRequest(t, "pipelined append", (<-got).Command.(*raft.AppendEntriesRequest), r)
	}
}

func TestHeartbeatsTakeTheFastPathAndOtherRPCsKeepWorking(t *testing.T) {
	leader, follower := newTransport(t, nil), newTransport(t, nil)
	answer(t, follower, nil)
	beats := make(chan struct{}, 1)
	follower.SetHeartbeatHandler(func(rpc raft.RPC) {
		beats <- struct{}{}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 9, Success: true}, nil)
	})
	var resp raft.AppendEntriesResponse
	hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("leader")}, Term: 9}
	if err := leader.AppendEntries("r1", follower.LocalAddr(), hb, &resp); err != nil || resp.Term != 9 {
		t.Fatalf("heartbeat: %v %+v", err, resp)
	}
	select {
	case <-beats:
	default:
		t.Fatal("a heartbeat did not reach the heartbeat handler")
	}
	var vote raft.RequestVoteResponse
	if err := leader.RequestVote("r1", follower.LocalAddr(), &raft.RequestVoteRequest{Term: 10}, &vote); err != nil || !vote.Granted {
		t.Fatalf("RequestVote: %v %+v", err, vote)
	}
	snap := bytes.Repeat([]byte("checkpoint"), 100_000)
	var sr raft.InstallSnapshotResponse
	if err := leader.InstallSnapshot("r1", follower.LocalAddr(), &raft.InstallSnapshotRequest{Term: 10, Size: int64(len(snap))}, &sr, bytes.NewReader(snap)); err != nil || !sr.Success {
		t.Fatalf("InstallSnapshot: %v %+v", err, sr)
	}
}

func TestMalformedFrameOnTheWireClosesTheConnectionAndReachesNoOne(t *testing.T) {
	logs := &logBuffer{}
	follower := newTransport(t, logs)
	got := make(chan raft.RPC, 1)
	answer(t, follower, got)
	c, err := net.Dial("tcp", string(follower.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := []byte{byte(Version1), byte(rpcAppendEntries)}
	frame = binary.BigEndian.AppendUint32(frame, uint32(testLimits.maxBody()+1))
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the follower kept the connection of an oversized frame open: %v", err)
	}
	if !bytes.HasPrefix([]byte{byte(Version1)}, rest) {
		t.Fatalf("the follower answered an oversized frame with %q, want nothing but its version byte", rest)
	}
	select {
	case rpc := <-got:
		t.Fatalf("an oversized frame reached raft as %T", rpc.Command)
	default:
	}
	if !strings.Contains(logs.String(), ErrFrameTooLarge.Error()) {
		t.Fatalf("the refusal was not logged with its reason; logs:\n%s", logs)
	}
}

// A replica still on raft's NetworkTransport and one on this transport
// refuse each other on the first byte, in both directions, and say so.
func TestMixedVersionPairFailsClearly(t *testing.T) {
	logs := &logBuffer{}
	ours := newTransport(t, logs)
	answer(t, ours, nil)
	theirs := raft.NewNetworkTransport(listenTCP(t), 2, 5*time.Second, io.Discard)
	defer theirs.Close()
	go func() {
		for rpc := range theirs.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
		}
	}()
	req := &raft.AppendEntriesRequest{Term: 1, Entries: entries(1, 1, 10)}

	err := theirs.AppendEntries("r1", ours.LocalAddr(), req, &raft.AppendEntriesResponse{})
	if err == nil {
		t.Fatal("raft's NetworkTransport got an answer from this transport")
	}
	if !strings.Contains(logs.String(), "another transport version") || !strings.Contains(logs.String(), "peerVersion=0x0") {
		t.Fatalf("this transport did not log the old peer's version; logs:\n%s", logs)
	}

	err = ours.AppendEntries("r1", theirs.LocalAddr(), req, &raft.AppendEntriesResponse{})
	if err == nil || !strings.Contains(err.Error(), "transport version") {
		t.Fatalf("appending to a NetworkTransport peer: %v, want an error naming the transport version", err)
	}
}

// A later version answering with its own byte is named in the error.
func TestPeerOfAnotherVersionIsNamed(t *testing.T) {
	ln := listenTCP(t)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte{0x82})
		_, _ = io.Copy(io.Discard, c)
	}()
	ours := newTransport(t, nil)
	err := ours.AppendEntries("r1", raft.ServerAddress(ln.Addr().String()), &raft.AppendEntriesRequest{Term: 1}, &raft.AppendEntriesResponse{})
	if !errors.Is(err, ErrVersionMismatch) || !strings.Contains(err.Error(), "0x82") {
		t.Fatalf("a peer answering version 0x82: %v, want ErrVersionMismatch naming 0x82", err)
	}
}
