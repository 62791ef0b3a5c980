package volume_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
)

// withEventRecorder gives the controller the events recorder the manager
// gives it (client-go's events broadcaster writing events.k8s.io Events to
// the API server), so the test sees what an operator sees, series
// aggregation included.
func (fx *fixture) withEventRecorder() {
	fx.t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		fx.t.Fatal(err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(fx.ctx); err != nil {
		fx.t.Fatal(err)
	}
	fx.t.Cleanup(b.Shutdown)
	fx.opts.Recorder = b.NewRecorder(env.Scheme, "volume-controller")
	fx.restart()
}

// volumeEvents lists the events about rv with reason, once the events of
// that reason add up to at least want occurrences (a series counts as its
// count) or after 10 seconds.
func (fx *fixture) volumeEvents(rv *storagev1alpha1.ReplicatedVolume, reason volume.EventReason, want int) []eventsv1.Event {
	fx.t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		fx.t.Fatal(err)
	}
	var got []eventsv1.Event
	var n int
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := cs.EventsV1().Events(metav1.NamespaceDefault).List(fx.ctx, metav1.ListOptions{})
		if err != nil {
			fx.t.Fatal(err)
		}
		got, n = nil, 0
		for _, e := range list.Items {
			if e.Regarding.UID != rv.UID || e.Reason != reason.String() {
				continue
			}
			got = append(got, e)
			n++
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
		}
		if n >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func describe(evs []eventsv1.Event) string {
	var parts []string
	for _, e := range evs {
		count := int32(1)
		if e.Series != nil {
			count = e.Series.Count
		}
		parts = append(parts, fmt.Sprintf("%s %s x%d: %s", e.Type, e.Reason, count, e.Note))
	}
	return strings.Join(parts, "; ")
}

// Each replica's placement is its own event (the events
// recorder merges events of one reason, action and object into a series
// that keeps the first message, so three Placed events about the volume
// read as "r0 placed, 3 times"); a robustness transition is one event, not
// one per reconcile.
func TestEachPlacementAndEachRobustnessTransitionIsItsOwnEvent(t *testing.T) {
	fx := newFixture(t)
	fx.withEventRecorder()
	rv := fx.provisioned()
	rv = fx.get(rv.Name)

	placed := fx.volumeEvents(rv, volume.EventPlaced, 3)
	if len(placed) != 3 {
		t.Errorf("%d Placed events, want 3 distinct ones: %s", len(placed), describe(placed))
	}
	for i := 0; i < 3; i++ {
		name := volume.ReplicaName(rv.Name, i)
		n := 0
		for _, e := range placed {
			if strings.Contains(e.Note, "replica "+name+" ") {
				n++
				if e.Series != nil {
					t.Errorf("the Placed event of %s is a series of %d: %s", name, e.Series.Count, e.Note)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d Placed events name %s, want 1: %s", n, name, describe(placed))
		}
	}

	vrs := fx.replicas(rv.Name)
	fx.hostReport(&vrs[0], storagev1alpha1.RoleCoordinator, true, false, 0)
	fx.hostReport(&vrs[1], storagev1alpha1.RoleFollower, true, false, 0)
	fx.hostReport(&vrs[2], storagev1alpha1.RoleFollower, true, false, 0)
	fx.converge(rv.Name)
	if healthy := fx.volumeEvents(rv, volume.EventVolumeHealthy, 1); len(healthy) != 1 {
		t.Errorf("Faulted to Healthy: %d VolumeHealthy events, want 1: %s", len(healthy), describe(healthy))
	}
	if coord := fx.volumeEvents(rv, volume.EventCoordinatorChanged, 1); len(coord) != 1 || !strings.Contains(coord[0].Note, vrs[0].Name) {
		t.Errorf("CoordinatorChanged events %s, want one naming %s", describe(coord), vrs[0].Name)
	}

	fx.hostReport(&vrs[2], storagev1alpha1.RoleStopped, false, false, 0)
	fx.converge(rv.Name)
	for i := 0; i < 3; i++ { // no write, so no event: a transition is emitted once
		if _, err := fx.reconcile(rv.Name); err != nil {
			t.Fatal(err)
		}
	}
	fx.volumeEvents(rv, volume.EventVolumeDegraded, 1)
	time.Sleep(time.Second) // an event a later reconcile recorded would be written by now
	degraded := fx.volumeEvents(rv, volume.EventVolumeDegraded, 1)
	if len(degraded) != 1 || degraded[0].Series != nil || degraded[0].Type != "Warning" || !strings.Contains(degraded[0].Note, vrs[2].Name) {
		t.Errorf("Healthy to Degraded: events %s, want one Warning naming %s", describe(degraded), vrs[2].Name)
	}
}
