package fsm

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// BenchmarkDigest measures FSM.Digest on a 1 GiB state (16 files of
// 64 MiB, every byte written; the files are in the page cache, as on a
// replica that just wrote them) against its floor, the SHA-256 of the same
// files read straight from the chunk store's live state (baseline). Reported per
// digest: digest-ms, floor-ms, their ratio, and apply-wait-ms, how long
// one apply issued just after the digest started waited (Digest holds the
// state machine's read lock only while it encodes the metadata and captures
// the store; the apply then pays the copy-on-write of the one chunk it
// writes).
func BenchmarkDigest(b *testing.B) {
	const files, fileSize = 16, 64 << 20
	h, inos := filledState(b, files, fileSize)
	f := h.f
	floor := func() {
		s := sha256.New()
		buf := make([]byte, 1<<20)
		for _, ino := range inos {
			for off := uint64(0); off < fileSize; off += uint64(len(buf)) {
				if err := f.store.ReadAt(ino, buf, off); err != nil {
					b.Fatal(err)
				}
				s.Write(buf)
			}
		}
		_ = s.Sum(nil)
	}
	floor() // warm the page cache for both
	var digest, base, wait time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		floor()
		base += time.Since(t0)

		started := make(chan struct{})
		waited := make(chan time.Duration)
		go func() {
			<-started
			time.Sleep(10 * time.Millisecond) // let Digest take the lock first
			w0 := time.Now()
			h.do(wire.Op{Kind: wire.KindWrite, Ino: inos[0], Offset: uint64(i), Data: []byte("x")})
			waited <- time.Since(w0)
		}()
		t0 = time.Now()
		close(started)
		if _, _, err := f.Digest(); err != nil {
			b.Fatal(err)
		}
		digest += time.Since(t0)
		wait += <-waited
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(digest), "digest-ms")
	b.ReportMetric(ms(base), "floor-ms")
	b.ReportMetric(float64(digest)/float64(base), "digest/floor")
	b.ReportMetric(ms(wait), "apply-wait-ms")
}
