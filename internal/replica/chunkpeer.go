package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/chunkstore"
	"github.com/cellfleet/cellfleet/internal/replica/mux"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// ChunkFetcher is a stream to one replica that answers FetchChunk: chunk
// idx of inode ino as its kept manifest names it. The caller checks the
// bytes against the manifest.
type ChunkFetcher interface {
	FetchChunk(ctx context.Context, manifest, ino, idx uint64) ([]byte, error)
	Close() error
}

// PeerTarget is the replica a DialPeer connects to, and with what.
type PeerTarget struct {
	Volume, ID, Address, ServerName string
	Credentials                     *mux.Credentials
	Logger                          *slog.Logger
}

// DialPeer connects to another replica of the volume (Config.DialPeer).
type DialPeer func(ctx context.Context, t PeerTarget) (ChunkFetcher, error)

// chunkPeer fetches, for the state machine restoring a checkpoint the
// coordinator sent, the chunks this replica lacks (fsm.ChunkSource): from
// the coordinator, which answers them from its own chunk store
// (serveChunk). docs/decisions/0010-chunked-store.md, "Follower transfer".
type chunkPeer struct {
	w  *Worker
	mu sync.Mutex
	id raft.ServerID
	p  ChunkFetcher
}

func (c *chunkPeer) FetchChunk(ctx context.Context, m *chunkstore.Manifest, e chunkstore.Entry) ([]byte, error) {
	p, err := c.peer(ctx)
	if err != nil {
		return nil, err
	}
	data, err := p.FetchChunk(ctx, m.ID, e.Ino, e.Index)
	if err != nil {
		c.drop(p)
	}
	return data, err
}

// peer is the stream to the current coordinator: the replica that sends
// checkpoints.
func (c *chunkPeer) peer(ctx context.Context) (ChunkFetcher, error) {
	if c.w.cfg.DialPeer == nil {
		return nil, errors.New("no coordinator to fetch chunks from: this process dials no peers")
	}
	r := c.w.shared.Load()
	if r == nil {
		return nil, errors.New("no coordinator to fetch chunks from: raft is not running")
	}
	addr, id := r.LeaderWithID()
	san, dial, ok := splitAddress(addr)
	if !ok {
		return nil, fmt.Errorf("no coordinator to fetch chunks from (leader %q at %q)", id, addr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p != nil && c.id == id {
		return c.p, nil
	}
	if c.p != nil {
		c.p.Close()
		c.p = nil
	}
	// The current credentials: a renewed certificate is used from the next
	// dial on, as the mux does (docs/replica-engine.md).
	p, err := c.w.cfg.DialPeer(ctx, PeerTarget{Volume: c.w.cfg.Volume, ID: string(id), Address: dial, ServerName: san,
		Credentials: c.w.cfg.Credentials.Load(), Logger: c.w.log})
	if err != nil {
		return nil, err
	}
	c.p, c.id = p, id
	return p, nil
}

func (c *chunkPeer) drop(p ChunkFetcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p == p {
		c.p.Close()
		c.p = nil
	}
}

func (c *chunkPeer) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p != nil {
		c.p.Close()
		c.p = nil
	}
}

// serveChunk answers a KindFetchChunk call from this replica's chunk store.
func (w *Worker) serveChunk(ops []wire.Op) wire.Reply {
	if len(ops) != 1 {
		return wire.Reply{Status: wire.StatusBadRequest, Message: "fetch-chunk is a call of its own"}
	}
	op := &ops[0]
	// A chunk sent is a checkpoint transfer: it takes one of the host's
	// rebuild slots while it is read and charges its bytes to the shared
	// rate (journal.Outbound).
	limit := func(r io.Reader) io.Reader { return r }
	if w.cfg.Outbound != nil {
		wrap, release, ok := w.cfg.Outbound.Begin()
		if !ok {
			return wire.Reply{Status: wire.StatusUnavailable, Message: "the host's rebuild transfers are all in use"}
		}
		defer release()
		limit = wrap
	}
	data, err := w.fsm.ManifestChunk(op.Ino2, op.Ino, op.Offset)
	if err != nil {
		return wire.Reply{Status: wire.StatusUnavailable, Message: err.Error()}
	}
	if data, err = io.ReadAll(limit(bytes.NewReader(data))); err != nil {
		return wire.Reply{Status: wire.StatusUnavailable, Message: err.Error()}
	}
	return wire.Reply{Status: wire.StatusOK, Results: []wire.Result{{Data: data, N: uint64(len(data))}}}
}
