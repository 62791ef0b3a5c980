package client

import (
	"context"
	"fmt"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// Peer is a stream to one replica for calls it answers from its own state,
// not the group's: the chunks of a checkpoint it sent
// (docs/decisions/0010-chunked-store.md). It registers no exactly-once
// session and follows no coordinator.
type Peer struct {
	cfg Config
	cn  *conn
}

// DialPeer connects to the replica at ep; a replica-host gives it to its
// workers (replica.Config.DialPeer, through cmd/replica-host).
func DialPeer(ctx context.Context, cfg Config, ep Endpoint) (*Peer, error) {
	cfg.Endpoints = []Endpoint{ep}
	full, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cn, err := dialConn(ctx, &full, ep, randomID())
	if err != nil {
		return nil, err
	}
	return &Peer{cfg: full, cn: cn}, nil
}

// FetchChunk returns chunk idx of inode ino as the replica's kept manifest
// names it. The caller checks the bytes against the manifest.
func (p *Peer) FetchChunk(ctx context.Context, manifest, ino, idx uint64) ([]byte, error) {
	rep, _, err := p.cn.roundTrip(ctx, []wire.Op{{Kind: wire.KindFetchChunk, Ino: ino, Offset: idx, Ino2: manifest}}, p.cfg.AttemptTimeout)
	if err != nil {
		return nil, fmt.Errorf("fetch chunk %d of inode %d from %s: %w", idx, ino, p.cn.ep.ID, err)
	}
	if rep.Status != wire.StatusOK || len(rep.Results) != 1 {
		return nil, fmt.Errorf("fetch chunk %d of inode %d from %s: %s: %s", idx, ino, p.cn.ep.ID, rep.Status, rep.Message)
	}
	r := rep.Results[0]
	if r.Errno != 0 {
		return nil, fmt.Errorf("fetch chunk %d of inode %d from %s: errno %d", idx, ino, p.cn.ep.ID, r.Errno)
	}
	// The reply may lend its frame (Result.Frame); the chunk is kept past
	// the reply, so copy it out.
	data := append([]byte(nil), r.Data...)
	rep.Release()
	return data, nil
}

// Close drops the stream.
func (p *Peer) Close() error {
	p.cn.close()
	return nil
}
