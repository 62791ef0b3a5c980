package fleet_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// stuckRollout makes a long-running fleet roll out an image whose container
// crash-loops: the rolling update replaces f-2 and waits there forever. It
// returns the disks before the rollout and the revision f-2 is stuck on.
func (fx *fixture) stuckRollout() (map[string]types.UID, string) {
	fx.t.Helper()
	fx.restartedOnOldDisks(3)
	disks := fx.claimUIDs()
	fx.kube.crashing[newImage] = true
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.RuntimeImage = newImage })
	fx.converge("f-2 crash-looping on the new revision", func() bool {
		p, ok := fx.pods()["f-2"]
		return ok && p.Labels[revisionLabel] == fx.sts().Status.UpdateRevision && crashLooping(p)
	})
	return disks, fx.pods()["f-2"].Labels[revisionLabel]
}

// waitOut lets minutes pass one at a time (testDelay is ten), the cluster and
// the operator acting after each.
func (fx *fixture) waitOut(minutes int) {
	fx.t.Helper()
	for range minutes {
		fx.advance(testDelay / 10)
		fx.kube.step(fx.ctx)
		fx.reconcile()
	}
}

func crashLooping(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			return true
		}
	}
	return false
}

// TestRevisionThatNeverBecomesReadyKeepsEveryDisk proves docs/fleet-operator.md's "a member
// waiting on its image or configuration" is left alone when its new revision
// crash-loops: a member never Ready on its current revision, after it was
// Ready on an earlier one, keeps its disk for twice the replacement delay,
// and the fleet reports Blocked naming the member and the revision.
func TestRevisionThatNeverBecomesReadyKeepsEveryDisk(t *testing.T) {
	fx := newFixture(t)
	disks, rev := fx.stuckRollout()
	fx.waitOut(20) // twice the replacement delay
	fx.requireNoMemberDeletes("a rollout to a revision that never becomes Ready")
	for name, uid := range disks {
		fx.requireDiskKept(name, string(uid))
	}
	fx.requireBlocked(celldv1alpha1.ReasonRevisionNotReady, "f-2", rev)
}

// TestRollbackFromRevisionThatNeverBecameReadyOnSameDisks proves a rollback
// (the template back to the earlier revision) after the new revision never
// became Ready for twice the delay makes the fleet Ready on the same disks.
func TestRollbackFromRevisionThatNeverBecameReadyOnSameDisks(t *testing.T) {
	fx := newFixture(t)
	disks, _ := fx.stuckRollout()
	fx.waitOut(20)
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.RuntimeImage = image })
	fx.converge("the rollback completed", fx.settled(3))
	fx.reconcile()
	if c := fx.condition(celldv1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Fatalf("after the rollback the fleet must be Ready; got %s: %s", c.Status, c.Message)
	}
	fx.requireNotBlocked()
	for name, uid := range disks {
		if got := fx.claimUIDs()[name]; got != uid {
			t.Fatalf("after the rollback the fleet must run on the same disks: %s was %s, now %q", name, uid, got)
		}
	}
}
