package fsm

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// FuzzApplyIsDeterministicAndNeverFails: any decodable entry, applied to
// two fresh replicas, leaves identical state, and no input (however
// hostile) stops the state machine as if the disk had failed.
func FuzzApplyIsDeterministicAndNeverFails(f *testing.F) {
	seed := func(ops ...wire.Op) {
		for i := range ops {
			ops[i].Session, ops[i].Seq = testSession, uint64(i+1)
		}
		f.Add(wire.EncodeEntry(&wire.Entry{Time: 5, Ops: ops}))
	}
	seed(wire.Op{Kind: wire.KindCreate, Ino: 1, Name: "f", NewIno: 2},
		wire.Op{Kind: wire.KindWrite, Ino: 2, Offset: 3, Data: []byte("abc")},
		wire.Op{Kind: wire.KindFallocate, Ino: 2, Offset: 1, Size: 4, Flags: wire.FallocKeepSize | wire.FallocPunchHole})
	seed(wire.Op{Kind: wire.KindMkdir, Ino: 1, Name: "d", NewIno: 2},
		wire.Op{Kind: wire.KindRename, Ino: 1, Name: "d", Ino2: 2, Name2: "e"},
		wire.Op{Kind: wire.KindSetattr, Ino: 2, Valid: wire.SetSize | wire.SetMode, Size: 9})
	seed(wire.Op{Kind: wire.KindSymlink, Ino: 1, Name: "l", NewIno: 2, Data: []byte("t")},
		wire.Op{Kind: wire.KindLink, Ino: 2, Ino2: 1, Name: "m"},
		wire.Op{Kind: wire.KindUnlink, Ino: 1, Name: "l", Flags: wire.KeepOrphan},
		wire.Op{Kind: wire.KindRelease, Ino: 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := wire.DecodeEntry(b); err != nil {
			return
		}
		var digests []string
		for r := 0; r < 2; r++ {
			h := newHarness(t, Limits{Capacity: 1 << 20})
			h.f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: b})
			if err := h.f.Failed(); err != nil {
				t.Fatalf("input stopped the state machine: %v", err)
			}
			_, d, err := h.f.Digest()
			if err != nil {
				t.Fatal(err)
			}
			digests = append(digests, d)
		}
		if digests[0] != digests[1] {
			t.Fatalf("the same entry applied to two fresh replicas diverged")
		}
	})
}
