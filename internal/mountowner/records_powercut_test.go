package mountowner

import (
	"testing"

	"github.com/cellfleet/cellfleet/internal/mountowner/api"
	"github.com/cellfleet/cellfleet/internal/testfs/powercut"
)

// A session record that write acknowledged names a mount the kernel may
// hold: after a power cut the next owner must still find it, or it never
// cleans that mount. The owner's state directory sits on a power-cut
// filesystem that drops every write and entry not synced.
func TestSessionRecordsSurviveAPowerCutOnceAcknowledged(t *testing.T) {
	p := powercut.MountT(t)
	o, err := New(Config{StateDir: p.Mountpoint()})
	if err != nil {
		t.Fatal(err)
	}
	session := func(vol string, st api.State) api.Session {
		return api.Session{VolumeID: vol, Target: "/var/lib/kubelet/pods/p/volumes/" + vol, State: st}
	}
	for _, s := range []api.Session{session("vol-a", api.StateMounting), session("vol-b", api.StateMounting),
		session("vol-a", api.StateMounted), session("vol-c", api.StateMounting)} {
		if err := o.recs.write(s); err != nil {
			t.Fatalf("write session record of %s: %v", s.VolumeID, err)
		}
	}
	if err := o.recs.remove("vol-c"); err != nil {
		t.Fatal(err)
	}
	recs := o.recs
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	lost := p.CutT(t)
	got, err := recs.load()
	if err != nil {
		t.Fatalf("session records after the power cut: %v", err)
	}
	byVolume := map[string]api.State{}
	for _, s := range got {
		byVolume[s.VolumeID] = s.State
	}
	want := map[string]api.State{"vol-a": api.StateMounted, "vol-b": api.StateMounting}
	for vol, st := range want {
		if byVolume[vol] != st {
			t.Errorf("after a power cut the session record of %s says %q, want the acknowledged %q (cut dropped %+v)", vol, byVolume[vol], st, lost)
		}
	}
	if len(byVolume) != len(want) {
		t.Errorf("after a power cut the session records are %v, want %v: a removal that was acknowledged came back", byVolume, want)
	}
}
