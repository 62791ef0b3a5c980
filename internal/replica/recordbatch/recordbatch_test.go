package recordbatch

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/pki"
)

// counted is a real TCP connection that counts its writes and can be told
// to fail them.
type counted struct {
	net.Conn
	writes atomic.Int64
	fail   atomic.Bool
}

var errInjected = errors.New("injected write failure")

func (c *counted) Write(p []byte) (int, error) {
	if c.fail.Load() {
		return 0, errInjected
	}
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// pair returns a TLS client over Wrap(counted) on loopback TCP and the
// server's end, after the handshake.
func pair(t *testing.T) (*tls.Conn, *counted, *tls.Conn) {
	t.Helper()
	ca, err := pki.NewCA("vol", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueTLS([]string{"peer"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *tls.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		s := tls.Server(Wrap(c), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
		if s.Handshake() != nil {
			accepted <- nil
			return
		}
		accepted <- s
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := &counted{Conn: raw}
	client := tls.Client(Wrap(cc), &tls.Config{RootCAs: ca.Pool(), ServerName: "peer", MinVersion: tls.VersionTLS13})
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	if server == nil {
		t.Fatal("server handshake failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, cc, server
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// readAll reads n bytes from c in the background.
func readAll(c net.Conn, n int) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, n)
		if _, err := io.ReadFull(c, b); err != nil {
			got <- nil
			return
		}
		got <- b
	}()
	return got
}

// A batched 1 MiB write leaves in a few socket writes, not one per 16 KiB
// record, and arrives whole; an unbatched one still goes record by record.
func TestBatchSendsTheRecordsOfAWriteTogether(t *testing.T) {
	client, cc, server := pair(t)
	data := pattern(1<<20, 1)

	got := readAll(server, len(data))
	before := cc.writes.Load()
	if err := Batch(client, func() error { _, err := client.Write(data); return err }); err != nil {
		t.Fatal(err)
	}
	batched := cc.writes.Load() - before
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatal("the batched write arrived damaged or incomplete")
	}
	// 1 MiB of records over flushAt, rounded up, plus the part flushed at
	// the end.
	if max := int64(len(data)/flushAt + 2); batched > max {
		t.Fatalf("a batched 1 MiB write took %d socket writes, want at most %d", batched, max)
	}

	got = readAll(server, len(data))
	before = cc.writes.Load()
	if _, err := client.Write(data); err != nil {
		t.Fatal(err)
	}
	plain := cc.writes.Load() - before
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatal("the unbatched write arrived damaged or incomplete")
	}
	if plain < 64 {
		t.Fatalf("an unbatched 1 MiB write took %d socket writes; expected one per 16 KiB record", plain)
	}
	t.Logf("1 MiB: %d socket writes batched, %d unbatched", batched, plain)
}

// Records held by a batch whose write to the socket fails are lost to the
// TLS stream, so the batch reports the failure and every later write fails
// rather than send records the peer could not decrypt.
func TestAFailedBatchFailsEveryLaterWrite(t *testing.T) {
	client, cc, _ := pair(t)
	err := Batch(client, func() error {
		if _, err := client.Write(pattern(4<<10, 2)); err != nil {
			return err
		}
		cc.fail.Store(true) // the socket fails when the batch is sent
		return nil
	})
	if !errors.Is(err, errInjected) {
		t.Fatalf("batch error = %v, want the socket's failure", err)
	}
	cc.fail.Store(false)
	if _, err := client.Write([]byte("after")); err == nil {
		t.Fatal("a write after a lost batch succeeded; the peer would see a gap in the record sequence")
	}
}

// Concurrent batches and plain writes on one connection (the client's
// calls, the reader's alerts) keep every write whole and in one piece.
func TestConcurrentBatchesKeepEveryWriteWhole(t *testing.T) {
	client, _, server := pair(t)
	const writers, each, size = 4, 40, 100 << 10
	total := writers * each * (8 + size)
	got := readAll(server, total)
	var wg sync.WaitGroup
	var mu sync.Mutex // one message per client.Write call, as the callers do
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				msg := binary.BigEndian.AppendUint64(nil, uint64(w)<<32|uint64(i))
				msg = append(msg, pattern(size, byte(w*31+i))...)
				write := func() error { mu.Lock(); defer mu.Unlock(); _, err := client.Write(msg); return err }
				var err error
				if i%3 == 0 {
					err = write()
				} else {
					err = Batch(client, write)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b := <-got
	if b == nil {
		t.Fatal("the stream ended early")
	}
	seen := map[uint64]bool{}
	for off := 0; off < len(b); off += 8 + size {
		id := binary.BigEndian.Uint64(b[off:])
		w, i := int(id>>32), int(uint32(id))
		if !bytes.Equal(b[off+8:off+8+size], pattern(size, byte(w*31+i))) {
			t.Fatalf("message %d of writer %d arrived damaged", i, w)
		}
		seen[id] = true
	}
	if len(seen) != writers*each {
		t.Fatalf("%d distinct messages arrived, want %d", len(seen), writers*each)
	}
}
