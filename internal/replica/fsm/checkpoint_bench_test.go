package fsm

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// filledState is a state machine with files files of fileSize bytes each,
// every byte written (pattern), closed when b ends.
func filledState(b *testing.B, files, fileSize int) (*harness, []uint64) {
	b.Helper()
	h := &harness{t: b, ino: 100}
	f, err := New(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Close)
	h.f = f
	h.entry(wire.Op{Kind: wire.KindRegister, Session: testSession})
	data := pattern(fileSize)
	inos := make([]uint64, files)
	for k := range inos {
		inos[k] = h.mk(wire.KindCreate, wire.RootIno, fmt.Sprintf("f%d", k))
		h.fill(inos[k], data)
	}
	return h, inos
}

// BenchmarkCheckpointPersist: the processor time of one checkpoint of a
// 64 MiB volume (four 16 MiB files) through the real checkpoint store,
// with every file written since the previous checkpoint (changed=4-of-4)
// or one of the four (changed=1-of-4). A checkpoint fdatasyncs and
// checksums only the chunks made since the previous one.
// cpu-ms/checkpoint counts the whole process (user and system) over the
// writes and the checkpoint.
func BenchmarkCheckpointPersist(b *testing.B) {
	const files, fileSize = 4, 16 << 20
	for _, changed := range []int{files, 1} {
		b.Run(fmt.Sprintf("changed=%d-of-%d", changed, files), func(b *testing.B) {
			h, inos := filledState(b, files, fileSize)
			store := openStore(b, b.TempDir())
			persist := func() { checkpointThroughStore(b, h, store, nil) }
			persist() // the previous checkpoint
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c0 := processCPU(b)
				for k := 0; k < changed; k++ {
					h.do(wire.Op{Kind: wire.KindWrite, Ino: inos[k], Offset: uint64(i) % fileSize, Data: []byte("changed")})
				}
				persist()
				cpu += processCPU(b) - c0
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/checkpoint")
		})
	}
}
