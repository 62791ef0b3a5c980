package publication_test

import (
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/csi/publication"
	"github.com/cellfleet/cellfleet/internal/testfs/powercut"
)

// A publication record that Put acknowledged is the claim that keeps a
// second holder off a single-writer volume: after a power cut the plugin
// must still find it, and a Delete that was acknowledged must stay done.
func TestPublicationRecordsSurviveAPowerCutOnceAcknowledged(t *testing.T) {
	p := powercut.MountT(t)
	s, err := publication.OpenStore(p.Mountpoint())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, r := range []publication.Record{
		{VolumeID: "vol-a", TargetPath: "/t/a", Holder: "pod-1", Node: "n1", CreatedAt: at},
		{VolumeID: "vol-b", TargetPath: "/t/b", Holder: "pod-2", Node: "n1", CreatedAt: at},
		{VolumeID: "vol-a", TargetPath: "/t/a2", Holder: "pod-3", Node: "n1", CreatedAt: at},
	} {
		if err := s.Put(r); err != nil {
			t.Fatalf("put record of %s: %v", r.VolumeID, err)
		}
	}
	if err := s.Delete("vol-b"); err != nil {
		t.Fatal(err)
	}
	lost := p.CutT(t)
	after, err := publication.OpenStore(p.Mountpoint())
	if err != nil {
		t.Fatalf("publication records after the power cut: %v", err)
	}
	if r, ok := after.Get("vol-a"); !ok || r.Holder != "pod-3" {
		t.Errorf("after a power cut vol-a's record is %+v (found %t), want the acknowledged holder pod-3 (cut dropped %+v)", r, ok, lost)
	}
	if r, ok := after.Get("vol-b"); ok {
		t.Errorf("after a power cut vol-b's acknowledged deletion came back: %+v", r)
	}
}
