package chunkstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkCapturePersist measures one checkpoint of a 64 MiB file after
// 32 random 4 KiB writes (docs/decisions/0010-chunked-store.md: 1 MiB
// chunks against 4 MiB): the first write to each chunk copies it, and the
// persist syncs and checksums every chunk written. Figures go to
// docs/performance.md.
func BenchmarkCapturePersist(b *testing.B) {
	for _, size := range []int{1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("chunk=%dMiB", size>>20), func(b *testing.B) {
			s := open(b, b.TempDir(), Options{ChunkSize: size})
			const file = 64 << 20
			for off := 0; off < file; off += 1 << 20 {
				write(b, s, 1, fill(1<<20, byte(off>>20)), uint64(off))
			}
			persist(b, s, 0)
			rng := rand.New(rand.NewPCG(1, 2))
			page := fill(4096, 7)
			before := s.Stats()
			b.ResetTimer()
			for i := range b.N {
				for range 32 {
					write(b, s, 1, page, rng.Uint64N(file/4096)*4096)
				}
				persist(b, s, uint64(i+1))
			}
			b.StopTimer()
			after := s.Stats()
			b.ReportMetric(float64(after.Copied+after.Cloned-before.Copied-before.Cloned)/float64(b.N), "copies/op")
			b.ReportMetric(float64(after.Synced-before.Synced)/float64(b.N), "synced/op")
		})
	}
}
