package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
)

// kubeSpec is a replica's spec as Kubernetes mode builds it: its storage
// named by claim UID, PV and node.
func kubeSpec() WorkerSpec {
	return WorkerSpec{Volume: "v", Replica: "v-r0", Generation: 1, Listen: "127.0.0.1:1", DataDir: "/nonexistent",
		CAFile: "ca", CertFile: "crt", KeyFile: "key", TokenFile: "tok",
		ClaimUID: "uid-a", PV: "pv-a", Node: "node-a"}
}

// A sealed replica given other storage than its record names is refused,
// whichever of claim UID, PV or node differs; an intent (Raft never ran) on
// other storage is recorded again; a record written before the storage
// fields existed is still read, accepted and completed.
func TestTheHistoryRefusesASealedReplicaOnOtherStorage(t *testing.T) {
	cases := []struct {
		name    string
		phase   RecordPhase
		change  func(*WorkerSpec)
		refused string // the differing field the refusal names, "" when accepted
	}{
		{"same storage", PhaseSealed, func(*WorkerSpec) {}, ""},
		{"claim recreated", PhaseSealed, func(s *WorkerSpec) { s.ClaimUID = "uid-b" }, `claim UID "uid-a", its spec names "uid-b"`},
		{"other PV", PhaseSealed, func(s *WorkerSpec) { s.PV = "pv-b" }, `PersistentVolume "pv-a", its spec names "pv-b"`},
		{"state moved to another node", PhaseSealed, func(s *WorkerSpec) { s.Node = "node-b" }, `node "node-a", its spec names "node-b"`},
		{"later generation", PhaseSealed, func(s *WorkerSpec) { s.Generation = 0; s.ClaimUID = "uid-b" }, `claim UID "uid-a"`},
		{"intent on other storage", PhaseIntent, func(s *WorkerSpec) { s.ClaimUID = "uid-b" }, ""},
		{"standalone spec", PhaseSealed, func(s *WorkerSpec) { s.ClaimUID, s.PV, s.Node = "", "", "" }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &Host{hist: history{dir: t.TempDir()}}
			if err := h.hist.record(kubeSpec(), tc.phase); err != nil {
				t.Fatal(err)
			}
			spec := kubeSpec()
			tc.change(&spec)
			_, err := h.checkHistory(spec)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused a replica on its own storage: %v", err)
			case tc.refused != "" && !errors.Is(err, ErrNotSameReplica):
				t.Fatalf("a sealed replica started on other storage than its record names (error %v)", err)
			case tc.refused != "" && !strings.Contains(err.Error(), tc.refused):
				t.Fatalf("the refusal %q does not name what differs (%s)", err, tc.refused)
			}
		})
	}
}

func TestARecordWrittenBeforeTheStorageFieldsIsReadAndCompleted(t *testing.T) {
	h := &Host{hist: history{dir: t.TempDir()}}
	spec := kubeSpec()
	p := h.hist.path(spec.Volume, spec.Replica)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	// As the host wrote it before phases and storage fields existed.
	if err := os.WriteFile(p, []byte(`{"volume":"v","replica":"v-r0","generation":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := h.checkHistory(spec)
	if err != nil || st != standingSealed {
		t.Fatalf("an old record reads as standing %d, error %v; want sealed, accepted", st, err)
	}
	rec, _, err := h.hist.recorded(spec.Volume, spec.Replica)
	if err != nil {
		t.Fatal(err)
	}
	if rec.ClaimUID != spec.ClaimUID || rec.PV != spec.PV || rec.Node != spec.Node || rec.Phase != PhaseSealed {
		t.Fatalf("the old record was not completed with the replica's storage: %+v", rec)
	}
	other := spec
	other.ClaimUID = "uid-b"
	if _, err := h.checkHistory(other); !errors.Is(err, ErrNotSameReplica) {
		t.Fatalf("once completed, the record does not refuse other storage: %v", err)
	}
}

// The refusal reaches the worker's status: Lost, with the reason, so the
// host reports it as it reports a missing identity.
func TestAHostReportsAReplicaOnOtherStorageLost(t *testing.T) {
	h, err := New(Config{StateDir: t.TempDir(), Limits: DefaultLimits(), SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.hist.record(kubeSpec(), PhaseSealed); err != nil {
		t.Fatal(err)
	}
	spec := kubeSpec()
	spec.ClaimUID = "uid-b"
	if _, _, err := h.Add(spec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := h.WaitState(ctx, spec.Key(), replica.ReplicaStateLost, replica.ReplicaStateFailed, replica.ReplicaStateRunning)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != replica.ReplicaStateLost || !strings.Contains(st.Reason, "uid-a") || st.DataExtent != "unknown" {
		t.Fatalf("a recorded replica given another claim is %s (%q, extent %q), want Lost naming the recorded claim", st.State, st.Reason, st.DataExtent)
	}
}
