package fsm

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// BenchmarkCheckpointCaptureStall measures how long applies wait because of
// a checkpoint capture of a 1 GiB volume (16 files of 64 MiB, every byte
// written): raft runs FSM.Snapshot on the apply goroutine, so its duration
// is an apply stall, and so is any copy the capture leaves to the next
// write of a file. Reported: capture-ms (Snapshot itself) and
// first-write-ms (the slowest first write to each file after the capture),
// against write-ms, the same write with no capture outstanding.
func BenchmarkCheckpointCaptureStall(b *testing.B) {
	const files, fileSize = 16, 64 << 20
	f, err := New(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var index, seq uint64
	apply := func(op wire.Op) wire.Result {
		index++
		if op.Kind != wire.KindRegister {
			seq++
			op.Session, op.Seq = testSession, seq
		}
		out := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand,
			Data: wire.EncodeEntry(&wire.Entry{Time: int64(index), Ops: []wire.Op{op}})})
		return out.([]wire.Result)[0]
	}
	apply(wire.Op{Kind: wire.KindRegister, Session: testSession})
	chunk := bytes.Repeat([]byte{'c'}, wire.MaxData)
	inos := make([]uint64, files)
	for k := range inos {
		r := apply(wire.Op{Kind: wire.KindCreate, Ino: wire.RootIno, Name: fmt.Sprintf("f%d", k), Mode: 0o644, NewIno: uint64(100 + k)})
		inos[k] = r.Attr.Ino
		for off := 0; off < fileSize; off += len(chunk) {
			if r := apply(wire.Op{Kind: wire.KindWrite, Ino: inos[k], Offset: uint64(off), Data: chunk}); r.Errno != 0 {
				b.Fatalf("fill: errno %d", r.Errno)
			}
		}
	}
	small := []byte("x")
	timeWrites := func() time.Duration {
		var worst time.Duration
		for _, ino := range inos {
			t0 := time.Now()
			apply(wire.Op{Kind: wire.KindWrite, Ino: ino, Data: small})
			worst = max(worst, time.Since(t0))
		}
		return worst
	}
	var capture, first, plain time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plain += timeWrites()
		t0 := time.Now()
		snap, err := f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		capture += time.Since(t0)
		first += timeWrites()
		snap.Release()
	}
	n := float64(b.N)
	b.ReportMetric(float64(capture.Milliseconds())/n, "capture-ms")
	b.ReportMetric(float64(first.Microseconds())/n/1000, "first-write-ms")
	b.ReportMetric(float64(plain.Microseconds())/n/1000, "write-ms")
}
