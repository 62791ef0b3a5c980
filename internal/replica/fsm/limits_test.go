package fsm

import (
	"bytes"
	"errors"
	"io"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// setLimits applies a limits command, zero fields taking the defaults.
func (h *harness) setLimits(lim Limits) {
	h.t.Helper()
	def := DefaultLimits()
	if lim.Capacity == 0 {
		lim.Capacity = def.Capacity
	}
	if lim.MaxSessions == 0 {
		lim.MaxSessions = def.MaxSessions
	}
	if err := h.applyLimits(lim); err != nil {
		h.t.Fatalf("set limits %+v: %v", lim, err)
	}
}

func (h *harness) applyLimits(lim Limits) error {
	h.index++
	out := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: EncodeSetLimits(lim)})
	if out == nil {
		return nil
	}
	return out.(error)
}

func TestLimitsAreReplicatedStateThatOnlyACommandChangesAndACheckpointCarries(t *testing.T) {
	h := newHarness(t, Limits{})
	if got, set := h.f.Limits(); set || got != DefaultLimits() {
		t.Fatalf("a fresh state machine must hold the default limits, unset; got %+v set=%v", got, set)
	}
	h.setLimits(Limits{Capacity: 8, MaxSessions: 3})
	f := h.mk(wire.KindCreate, wire.RootIno, "f")
	if got := errnoOf(h.do(wire.Op{Kind: wire.KindWrite, Ino: f, Data: []byte("123456789")})); got != syscall.ENOSPC {
		t.Fatalf("a write past the replicated capacity: got %v, want ENOSPC", got)
	}
	if err := h.applyLimits(Limits{Capacity: 4, MaxSessions: 3}); !errors.Is(err, ErrLimitsRefused) {
		t.Fatalf("shrinking the capacity must be refused, got %v", err)
	}
	if err := h.applyLimits(Limits{Capacity: 16, MaxSessions: 0}); !errors.Is(err, ErrLimitsRefused) {
		t.Fatalf("an empty session table must be refused, got %v", err)
	}
	h.setLimits(Limits{Capacity: 16, MaxSessions: 3})
	if r := h.do(wire.Op{Kind: wire.KindWrite, Ino: f, Data: []byte("123456789")}); r.Errno != 0 {
		t.Fatalf("after growth to 16 bytes a 9-byte write must succeed: %v", errnoOf(r))
	}
	for id := uint64(1); id <= 5; id++ {
		h.do(wire.Op{Kind: wire.KindRegister, Session: 1000 + id})
	}
	if n := len(h.f.st.Sessions); n != 3 {
		t.Fatalf("the session table holds %d sessions, want the replicated 3", n)
	}

	other := newHarness(t, Limits{})
	restoreInto(t, h.f, other.f)
	if got, set := other.f.Limits(); !set || got != (Limits{Capacity: 16, MaxSessions: 3}) {
		t.Fatalf("a restored checkpoint must carry the limits, got %+v set=%v", got, set)
	}
	_, d1, _ := h.f.Digest()
	_, d2, _ := other.f.Digest()
	if d1 != d2 {
		t.Fatalf("the restored replica diverges from the checkpointed one")
	}
}

// restoreInto checkpoints from and installs the checkpoint into to.
func restoreInto(t *testing.T, from, to *FSM) {
	t.Helper()
	state := persistBytes(t, from)
	to.opt.Chunks = chunksOf(t, from)
	if err := to.Restore(io.NopCloser(bytes.NewReader(state))); err != nil {
		t.Fatal(err)
	}
}
