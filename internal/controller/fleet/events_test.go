package fleet_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// count is how many events of reason the operator recorded.
func (e *eventLog) count(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, r := range e.reasons {
		if r == reason {
			n++
		}
	}
	return n
}

// requireEvents fails unless each reason was recorded exactly as often as
// want says.
func (fx *fixture) requireEvents(during string, want map[string]int) {
	fx.t.Helper()
	for reason, n := range want {
		if got := fx.evts.count(reason); got != n {
			fx.t.Fatalf("%s: the operator must record %d %s event(s), once per step and not again on later reconciles; got %d",
				during, n, reason, got)
		}
	}
}

// idle lets the operator and the cluster act a few more times with nothing
// new happening.
func (fx *fixture) idle() {
	for range 4 {
		fx.reconcile()
		fx.kube.step(fx.ctx)
	}
}

// TestEventsRecordEachGrowthContractionHandoffAndDeletionStepOnce proves the
// operator records an event for each growth run, each contraction step, each
// handoff phase (prepared, committed, released) and each deletion phase, on
// the step's transition only: reconciles that find nothing new record none.
func TestEventsRecordEachGrowthContractionHandoffAndDeletionStepOnce(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, noPlacement)
	fx.idle()
	fx.requireEvents("a fleet created with 3 members", map[string]int{"GrowthRun": 1, "ContractionStep": 0})

	fx.kube.markLost(fx.ctx, "data-f-1")
	fx.reconcile()
	fx.converge("f-1 back on a fresh disk", fx.settled(3))
	fx.idle()
	fx.requireEvents("a lost volume replaced", map[string]int{
		"ReplacementPrepared": 1, "MemberReplaced": 1, "ReplacementReleased": 1, "ReplacementAborted": 0,
	})

	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 2 })
	fx.converge("contracted to 2 members", fx.settled(2))
	fx.idle()
	fx.requireEvents("a contraction by one member", map[string]int{"ContractionStep": 1, "GrowthRun": 1})

	fx.must(env.Client.Delete(fx.ctx, fx.fleet()))
	fx.converge("the fleet deleted", func() bool {
		return apierrors.IsNotFound(fx.get(fleetName, &celldv1alpha1.CelldFleet{}))
	})
	fx.requireEvents("a fleet deletion", map[string]int{"DeletingCompute": 1, "DeletingDisks": 1, "FleetRemoved": 1})
}

// TestEventsRecordCapacityStepMigrationRecreationAndAbortedHandoffOnce proves
// a capacity-policy step, the orphaning recreation of a StatefulSet during
// migration and an aborted handoff are each recorded once.
func TestEventsRecordCapacityStepMigrationRecreationAndAbortedHandoffOnce(t *testing.T) {
	t.Run("capacity policy step", func(t *testing.T) {
		fx := newFixture(t)
		fx.runningFleet(3, noPlacement, withCapacity(celldv1alpha1.CapacityAutomatic, 2, 5, 1))
		fx.recommend("a", 4)
		fx.converge("grown to 4 members", fx.settled(4))
		fx.idle()
		fx.requireEvents("one capacity recommendation applied", map[string]int{"CapacityStep": 1, "GrowthRun": 2})
	})
	t.Run("orphaning recreation of a StatefulSet", func(t *testing.T) {
		fx := newFixture(t)
		fx.v005Fleet(appsv1.OrderedReadyPodManagement)
		fx.converge("the adopted fleet rolled out", fx.settled(3))
		fx.idle()
		fx.requireEvents("a migration from an OrderedReady StatefulSet", map[string]int{"StatefulSetRecreated": 1})
	})
	t.Run("aborted handoff", func(t *testing.T) {
		fx := newFixture(t)
		fx.restartedOnOldDisks(3)
		fx.memberGoesDown("f-1")
		fx.advance(testDelay + time.Second)
		fx.rec.inject = injectAt(handoffWrites[1], failWrite) // the Pod delete, the commitment point
		if err := fx.tryReconcile(); err == nil {
			t.Fatal("a reconcile whose commitment-point delete failed must report an error")
		}
		fx.rec.inject = nil
		delete(fx.kube.down, "f-1") // the member recovers before the next reconcile
		fx.kube.step(fx.ctx)
		fx.converge("f-1 Ready again", fx.settled(3))
		fx.idle()
		fx.requireEvents("a handoff whose Pod delete failed", map[string]int{
			"ReplacementPrepared": 1, "ReplacementAborted": 1, "ReplacementReleased": 1, "MemberReplaced": 0,
		})
	})
}
