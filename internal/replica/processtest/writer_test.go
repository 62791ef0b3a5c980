package processtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// recordWriter appends record(0), record(1), ... to one file until stopped,
// counting the appends acknowledged; the first that is not stops it.
type recordWriter struct {
	t       testing.TB
	written atomic.Int64
	done    chan error
	stop    context.CancelFunc
}

// startRecords starts a recordWriter whose appends each wait up to timeout.
func startRecords(t testing.TB, cl *client.Client, ino uint64, timeout time.Duration) *recordWriter {
	ctx, stop := context.WithCancel(context.Background())
	w := &recordWriter{t: t, done: make(chan error, 1), stop: stop}
	t.Cleanup(stop)
	go func() {
		for k := 0; ctx.Err() == nil; k++ {
			wctx, cancel := context.WithTimeout(context.Background(), timeout)
			_, _, err := cl.Append(wctx, ino, record(k))
			cancel()
			if err != nil {
				w.done <- fmt.Errorf("append of record %d was not acknowledged: %w", k, err)
				return
			}
			w.written.Store(int64(k + 1))
		}
		w.done <- nil
	}()
	return w
}

// acknowledged is how many records were acknowledged so far.
func (w *recordWriter) acknowledged() int64 { return w.written.Load() }

// waitFor waits until n records are acknowledged, failing the test if the
// writer failed first or within passes.
func (w *recordWriter) waitFor(n int64, within time.Duration) {
	w.t.Helper()
	poll.Until(w.t, within, fmt.Sprintf("%d records written", n), func() error {
		select {
		case err := <-w.done:
			w.t.Fatal(err)
		default:
		}
		if got := w.written.Load(); got < n {
			return fmt.Errorf("%d written", got)
		}
		return nil
	})
}

// finish stops the writer and returns how many records were acknowledged;
// a failed append fails the test.
func (w *recordWriter) finish() int {
	w.t.Helper()
	w.stop()
	if err := <-w.done; err != nil {
		w.t.Fatal(err)
	}
	return int(w.written.Load())
}
