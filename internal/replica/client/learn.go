package client

import (
	"fmt"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// A mount is staged with the endpoints the volume had then. When a replica
// is replaced, the new one has an ID and address the mount never saw, and
// once it coordinates every other worker points there. The client learns
// such a coordinator from the hint (ID, address, TLS server name) and adds
// it to its targets. The hint cannot take the mount outside the volume's
// trust: the connection to a learned endpoint is verified like any other,
// against the volume's CA and the hinted server name, before the token is
// sent.

// maxLearned bounds the endpoints a client learns: the most members a
// volume has at once (5 replicas, plus one being added while another is
// replaced). Past it the oldest learned endpoint is forgotten.
const maxLearned = 6

// learn adds the coordinator a hint names to the client's endpoints and
// returns its index, and the stream of an endpoint it forgot for the caller
// to close once it released c.mu (closing a TLS stream may wait on the
// network). Callers hold c.mu.
func (c *Client) learn(rep wire.Reply) (int, *conn, error) {
	if rep.LeaderAddr == "" || rep.LeaderServerName == "" {
		return 0, nil, fmt.Errorf("coordinator %q is not one of the volume's endpoints and the hint names no address and server name to reach it", rep.LeaderID)
	}
	ep := Endpoint{ID: rep.LeaderID, Address: rep.LeaderAddr, ServerName: rep.LeaderServerName}
	// Copy on write: Config.Endpoints may share its array with the
	// caller's configuration.
	eps := append(make([]Endpoint, 0, len(c.cfg.Endpoints)+1), c.cfg.Endpoints...)
	var forgotten *conn
	if len(eps)-c.configured >= maxLearned {
		oldest := eps[c.configured]
		forgotten = c.conns[oldest.ID]
		delete(c.conns, oldest.ID)
		eps = append(eps[:c.configured], eps[c.configured+1:]...)
		if c.target > c.configured {
			c.target--
		} else if c.target == c.configured {
			c.target = 0
		}
	}
	eps = append(eps, ep)
	c.cfg.Endpoints = eps
	c.log.Info("following a coordinator outside the configured endpoints", "coordinator", ep.ID,
		"address", ep.Address, "serverName", ep.ServerName)
	return len(eps) - 1, forgotten, nil
}
