package main

import (
	"context"
	"crypto/tls"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// dialPeer is the workers' replica.Config.DialPeer: a follower restoring a
// checkpoint fetches the chunks it lacks from the coordinator over the
// client's stream (docs/decisions/0010-chunked-store.md). It lives here
// because neither the worker nor the host may import the client.
func dialPeer(ctx context.Context, t replica.PeerTarget) (replica.ChunkFetcher, error) {
	return client.DialPeer(ctx, client.Config{Volume: t.Volume, RootCAs: t.Credentials.CA,
		Certificates: []tls.Certificate{t.Credentials.Certificate}, Token: t.Credentials.Token, Logger: t.Logger},
		client.Endpoint{ID: t.ID, Address: t.Address, ServerName: t.ServerName})
}
