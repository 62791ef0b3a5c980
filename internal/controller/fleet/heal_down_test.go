package fleet_test

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestReplacementDelayTimedFromMembersFirstDownMoment proves docs/fleet-operator.md's "a
// member that has stayed down for the replacement delay" is timed from the
// member, not from its current Pod: a member whose Pod is force-deleted and
// recreated while it is down, and whose operator restarts meanwhile, is
// replaced at the delay after its first down moment.
func TestReplacementDelayTimedFromMembersFirstDownMoment(t *testing.T) {
	fx := newFixture(t)
	fx.restartedOnOldDisks(3)
	disk := string(fx.claimUIDs()["data-f-1"])
	fx.memberGoesDown("f-1")
	firstDown := fx.clock.Now()

	fx.advance(4 * time.Minute)
	old := fx.pods()["f-1"]
	uid := old.UID
	// As the stranded rule or an administrator does: the StatefulSet recreates
	// the member, which is still down in its new Pod.
	fx.must(env.Client.Delete(fx.ctx, old, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid}))
	fx.converge("f-1 recreated, still down", func() bool {
		p, ok := fx.pods()["f-1"]
		return ok && p.UID != uid && p.Spec.NodeName != "" && !isReady(p)
	})
	fx.reconcile()
	fx.restartOperator() // nothing carries over but the cluster

	fx.clock.SetTime(firstDown.Add(testDelay - time.Second))
	fx.reconcile()
	fx.requireNoMemberDeletes("the replacement delay, counted from the member's first down moment")
	fx.clock.SetTime(firstDown.Add(testDelay + time.Second))
	fx.reconcile()
	if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 1 || d[0].name != "data-f-1" {
		t.Fatalf("a member down for the replacement delay since its first down moment must be replaced, "+
			"although its Pod was recreated and the operator restarted since; claim deletes: %v", d)
	}
	fx.requireDiskReplaced("data-f-1", disk)
}
