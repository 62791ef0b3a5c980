// Package recordbatch sends the TLS records of one large write in few
// socket writes.
//
// crypto/tls seals at most 16 KiB per record and hands each record to the
// connection beneath it at once, so a 1 MiB frame costs 64 write system
// calls and as many TCP pushes, and wakes the reader up to 64 times (what
// batching them buys: docs/performance.md, "Data-path optimisations: what
// each buys"). Wrap puts a connection beneath crypto/tls that, while a
// Batch runs, keeps the sealed records in a pooled buffer and writes them
// together when the batch ends or the buffer fills. Outside a batch it
// passes every write straight through, so the handshake, alerts and small
// writes behave as before.
//
// Nothing is sealed or parsed here: the records are crypto/tls's, whole and
// in order, and the buffer only changes how many system calls carry them.
package recordbatch

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
)

// flushAt bounds what one batch holds before it writes: large enough that
// the system calls per MiB fall from 64 to 4, small enough that the pooled
// buffers of many idle connections are not kept.
const flushAt = 256 << 10

// buffers start empty and grow by append to what their batches held: a
// batch of one small call then costs a small buffer, not a flushAt one
// (which mattered where the pool drops buffers, as under -race, and after
// the collector empties it).
var buffers = sync.Pool{New: func() any { return new([]byte) }}

// conn is the connection beneath crypto/tls.
type conn struct {
	net.Conn

	mu    sync.Mutex
	depth int     // batches running
	buf   *[]byte // records held, from the first held write to the batch's end
	err   error   // a failed write: the TLS stream has lost records
}

// Wrap returns c with batching; pass the result to tls.Client or
// tls.Server.
func Wrap(c net.Conn) net.Conn { return &conn{Conn: c} }

// Write holds p while a batch runs, otherwise writes it.
func (c *conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.depth == 0 {
		return c.write(p)
	}
	if c.buf == nil {
		c.buf = buffers.Get().(*[]byte)
	}
	if len(*c.buf)+len(p) > flushAt {
		if _, err := c.flush(); err != nil {
			return 0, err
		}
		if len(p) > flushAt {
			return c.write(p)
		}
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

func (c *conn) write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		// crypto/tls has counted the records as sent: after a short write
		// the stream cannot go on, so every later write fails too.
		c.err = err
	}
	return n, err
}

func (c *conn) flush() (int, error) {
	if c.buf == nil || len(*c.buf) == 0 {
		return 0, nil
	}
	n, err := c.write(*c.buf)
	*c.buf = (*c.buf)[:0]
	return n, err
}

func (c *conn) begin() {
	c.mu.Lock()
	c.depth++
	c.mu.Unlock()
}

// end writes what the batch holds, so the caller's bytes have left when
// Batch returns.
func (c *conn) end() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.flush()
	if c.depth--; c.depth == 0 && c.buf != nil {
		*c.buf = (*c.buf)[:0]
		buffers.Put(c.buf)
		c.buf = nil
	}
	if err == nil {
		err = c.err
	}
	return err
}

// Batch runs write, which writes to tc, and sends the records it makes
// together. The error is write's, or the socket's when the records could
// not be sent; either way the connection is then unusable. A connection
// not made by Wrap just runs write.
func Batch(tc net.Conn, write func() error) error {
	t, ok := tc.(*tls.Conn)
	if !ok {
		return write()
	}
	c, ok := t.NetConn().(*conn)
	if !ok {
		return write()
	}
	c.begin()
	err := write()
	if ferr := c.end(); err == nil {
		err = ferr
	}
	return err
}

// DialTLS dials addr, wraps the connection and runs the TLS handshake as
// tls.Dialer would, all within ctx.
func DialTLS(ctx context.Context, d *net.Dialer, addr string, cfg *tls.Config) (*tls.Conn, error) {
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(Wrap(nc), cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}
