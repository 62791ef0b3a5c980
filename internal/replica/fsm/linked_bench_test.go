package fsm

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// streamedSink hides the store's FilesDir, so Persist streams the
// checkpoint (format 1, the code before linked checkpoints) into the same
// real store: the baseline of BenchmarkCheckpointPersist.
type streamedSink struct{ raft.SnapshotSink }

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
// streamed (format 1) against linked (format 2), with every file written
// since the previous checkpoint (all-changed) or one of the four
// (one-changed). cpu-ms/checkpoint counts the whole process (user and
// system, so the page-cache copies and the flushes' submission too) over
// the writes and the checkpoint.
func BenchmarkCheckpointPersist(b *testing.B) {
	const files, fileSize = 4, 16 << 20
	for _, changed := range []int{files, 1} {
		for _, linked := range []bool{false, true} {
			name := map[bool]string{false: "streamed", true: "linked"}[linked]
			b.Run(fmt.Sprintf("%s/changed=%d-of-%d", name, changed, files), func(b *testing.B) {
				h, inos := filledState(b, files, fileSize)
				store := openStore(b, b.TempDir())
				var wrap func(raft.SnapshotSink) raft.SnapshotSink
				if !linked {
					wrap = func(s raft.SnapshotSink) raft.SnapshotSink { return streamedSink{s} }
				}
				persist := func() { checkpointThroughStore(b, h, store, wrap) }
				persist() // the previous checkpoint
				var cpu time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					// The writes count: a linked checkpoint leaves each
					// changed file's copy-on-write to its next write.
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
}
