// Package logstorebench compares the replica journal with hashicorp/raft-wal
// (docs/decisions/0001-log-store.md). It is its own module so that raft-wal
// is not a dependency of cellfleet: run it with
// `cd test/logstorebench && GOWORK=off go test -run XXX -bench . -benchtime 2000x`.
package logstorebench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/replica/journal"
)

// BenchmarkLogStore compares this journal with hashicorp/raft-wal v0.4.1
// (the measured input of docs/decisions/0001-log-store.md): appends of one
// entry and of 64-entry batches, each durable before returning, beside a raw
// fdatasync'd append of the same bytes in the same run.
func BenchmarkLogStore(b *testing.B) {
	stores := map[string]func(dir string) (raft.LogStore, func()){
		"journal": func(dir string) (raft.LogStore, func()) {
			l, _, err := journal.OpenLog(dir, 64<<20)
			if err != nil {
				b.Fatal(err)
			}
			return l, func() { l.Close() }
		},
		"raft-wal": func(dir string) (raft.LogStore, func()) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				b.Fatal(err)
			}
			w, err := wal.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			return w, func() { w.Close() }
		},
	}
	for _, batch := range []int{1, 64} {
		for _, size := range []int{128, 4 << 10} {
			for _, name := range []string{"journal", "raft-wal"} {
				b.Run(fmt.Sprintf("%s/batch=%d/%dB", name, batch, size), func(b *testing.B) {
					dir := b.TempDir()
					store, done := stores[name](filepath.Join(dir, "store"))
					defer done()
					data := make([]byte, size)
					b.SetBytes(int64(batch * size))
					b.ResetTimer()
					start := time.Now()
					idx := uint64(1)
					for i := 0; i < b.N; i++ {
						logs := make([]*raft.Log, batch)
						for k := range logs {
							logs[k] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
							idx++
						}
						if err := store.StoreLogs(logs); err != nil {
							b.Fatal(err)
						}
					}
					rate := float64(b.N) / time.Since(start).Seconds()
					b.StopTimer()
					raw := rawRate(b, dir, batch*size, max(b.N, 100))
					b.ReportMetric(rate, "appends/s")
					b.ReportMetric(rate/raw, "ratio-vs-raw")
				})
			}
		}
	}
}

func rawRate(b *testing.B, dir string, size, n int) float64 {
	fh, err := os.Create(filepath.Join(dir, "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, size)
	start := time.Now()
	for i := 0; i < n; i++ {
		fh.Write(buf)
		if err := unix.Fdatasync(int(fh.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}
