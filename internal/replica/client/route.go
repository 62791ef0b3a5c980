package client

import (
	"context"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// current returns the stream to the worker the client believes coordinates,
// dialing it if needed.
func (c *Client) current(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	ep := c.cfg.Endpoints[c.target]
	if cn := c.conns[ep.ID]; cn != nil && !cn.broken() {
		c.mu.Unlock()
		return cn, nil
	}
	session := c.session
	c.mu.Unlock()
	cn, err := dialConn(ctx, &c.cfg, ep, session)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cn.close()
		return nil, ErrClosed
	}
	if old := c.conns[ep.ID]; old != nil && !old.broken() {
		cn.close()
		return old, nil
	}
	c.conns[ep.ID] = cn
	return cn, nil
}

func (c *Client) drop(cn *conn) {
	cn.close()
	c.mu.Lock()
	if c.conns[cn.ep.ID] == cn {
		delete(c.conns, cn.ep.ID)
	}
	c.mu.Unlock()
}

// follow switches to the coordinator a worker named; it reports whether that
// is a change worth an immediate retry. A coordinator outside the known
// endpoints is learned from the hint (learn.go).
func (c *Client) follow(rep wire.Reply) bool {
	if rep.LeaderID == "" {
		return false
	}
	c.mu.Lock()
	i, ok := c.endpointIndex(rep.LeaderID)
	var forgotten *conn
	if !ok {
		var err error
		if i, forgotten, err = c.learn(rep); err != nil {
			c.mu.Unlock()
			c.log.Warn("ignoring coordinator hint", "error", err)
			return false
		}
	}
	changed := c.target != i
	c.target = i
	c.mu.Unlock()
	if forgotten != nil {
		forgotten.close()
	}
	return changed
}

func (c *Client) rotate() {
	c.mu.Lock()
	c.target = (c.target + 1) % len(c.cfg.Endpoints)
	c.mu.Unlock()
}

// endpointIndex finds an endpoint by replica ID. Callers hold c.mu.
func (c *Client) endpointIndex(id string) (int, bool) {
	for i, ep := range c.cfg.Endpoints {
		if ep.ID == id {
			return i, true
		}
	}
	return 0, false
}
