package host

import (
	"path/filepath"
	"testing"

	"github.com/cellfleet/cellfleet/internal/testfs/powercut"
)

// A sealed record must outlive a power cut even when recording it made the
// state directory: otherwise the replica, which may have voted, would be
// initialised afresh (docs/replica-engine.md, "Identity, loss and recovery").
func TestASealedRecordSurvivesAPowerCutThatFollowsItsStateDirectory(t *testing.T) {
	p := powercut.MountT(t)
	h := history{dir: filepath.Join(p.Mountpoint(), "state")}
	spec := WorkerSpec{Volume: "v", Replica: "r0", Generation: 1}
	if err := h.record(spec, PhaseSealed); err != nil {
		t.Fatal(err)
	}
	lost := p.CutT(t)
	got, err := h.standing(spec.Volume, spec.Replica, spec.Generation)
	if err != nil {
		t.Fatal(err)
	}
	if got != standingSealed {
		t.Fatalf("after a power cut a sealed replica's record reads as %d, not sealed: it would be initialised afresh (cut dropped %+v)", got, lost)
	}
}
