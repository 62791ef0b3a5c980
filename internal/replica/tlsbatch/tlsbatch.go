// Package tlsbatch gives the replica's TLS connections (client to
// coordinator, coordinator to followers) writes whose records leave the
// process in few socket writes.
//
// Why: crypto/tls seals a Write into records of at most 16 KiB and writes
// each record to the socket on its own: 64 write system calls per MiB, each
// paying the loopback TCP stack's send and the receiver's wake-up. On the
// replicated mount's 1 MiB write path that was 17 % of the coordinator's
// processor time (docs/performance.md). A Conn collects the records of one
// Write in a pooled buffer and writes them in pieces of up to 256 KiB; the
// handshake, alerts and anything crypto/tls writes outside a Write go out as
// before. The bytes on the wire are the same.
//
// tlsbatch must never import anything of this module.
package tlsbatch

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
)

// batchSize is the largest socket write a Conn makes from collected records.
const batchSize = 256 << 10

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, batchSize); return &b }}

// Conn is a TLS connection whose Write collects its records (see the
// package comment). Everything else is the embedded *tls.Conn's.
type Conn struct {
	*tls.Conn
	raw *collector
}

// Server wraps c as the server side of a TLS connection.
func Server(c net.Conn, cfg *tls.Config) *Conn {
	raw := &collector{Conn: c}
	return &Conn{Conn: tls.Server(raw, cfg), raw: raw}
}

// Client wraps c as the client side of a TLS connection.
func Client(c net.Conn, cfg *tls.Config) *Conn {
	raw := &collector{Conn: c}
	return &Conn{Conn: tls.Client(raw, cfg), raw: raw}
}

// Dial connects to addr over TCP and completes the TLS handshake within
// ctx, as tls.Dialer does.
func Dial(ctx context.Context, d *net.Dialer, addr string, cfg *tls.Config) (*Conn, error) {
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS server name from %q: %w", addr, err)
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	c := Client(nc, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Write seals p as crypto/tls does and writes the records in batches.
func (c *Conn) Write(p []byte) (int, error) {
	c.raw.collect()
	n, err := c.Conn.Write(p)
	if ferr := c.raw.flush(); err == nil {
		err = ferr
	}
	return n, err
}

// collector is the socket under crypto/tls. While one or more Writes are in
// progress it keeps what crypto/tls writes, up to batchSize, and writes it
// out when full and when a Write ends.
type collector struct {
	net.Conn
	mu         sync.Mutex
	collecting int     // Writes in progress
	buf        *[]byte // pooled, only while something is kept
}

func (r *collector) collect() {
	r.mu.Lock()
	r.collecting++
	r.mu.Unlock()
}

// flush ends one Write: what is kept goes out, in order, whatever other
// Writes are still in progress (crypto/tls serialises their records).
func (r *collector) flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collecting--
	return r.sendLocked()
}

func (r *collector) sendLocked() error {
	if r.buf == nil {
		return nil
	}
	bp := r.buf
	r.buf = nil
	var err error
	if len(*bp) > 0 {
		_, err = r.Conn.Write(*bp)
	}
	*bp = (*bp)[:0]
	buffers.Put(bp) // only now: the pool may hand it to another connection
	return err
}

func (r *collector) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.collecting == 0 {
		if err := r.sendLocked(); err != nil {
			return 0, err
		}
		return r.Conn.Write(p)
	}
	if r.buf != nil && len(*r.buf)+len(p) > batchSize {
		if err := r.sendLocked(); err != nil {
			return 0, err
		}
	}
	if len(p) >= batchSize {
		return r.Conn.Write(p)
	}
	if r.buf == nil {
		r.buf = buffers.Get().(*[]byte)
	}
	*r.buf = append(*r.buf, p...)
	return len(p), nil
}
