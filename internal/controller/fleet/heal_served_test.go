package fleet_test

import (
	"testing"
	"time"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// TestOriginalMemberOnCorruptDisk proves the corrupt-disk case for a fleet's
// original members (docs/decisions/0004-served-disk-mark.md): a member on a
// disk created for its current Pod that has served (been Ready) and then
// cannot start is replaced after the delay; a member on a disk created for
// its current Pod that never served, original or on a fresh replacement
// disk, is left alone: a new disk would not help it (docs/fleet-operator.md,
// "Self-healing").
func TestOriginalMemberOnCorruptDisk(t *testing.T) {
	t.Run("original member that served, then cannot start, is replaced after the delay", func(t *testing.T) {
		fx := newFixture(t)
		fx.runningFleet(3, noPlacement) // original members: every disk created for its current Pod
		disk := string(fx.claimUIDs()["data-f-1"])
		if got := fx.pods()["f-1"].Annotations[celldv1alpha1.AnnotationServedOn]; got != disk {
			t.Fatalf("a Ready original member must be marked as served on its claim %s; got %q", disk, got)
		}
		fx.advance(6 * time.Minute)
		fx.reconcile()
		fx.rec.reset()
		fx.memberGoesDown("f-1") // its disk went bad: celld no longer starts in the same Pod
		fx.advance(testDelay - time.Second)
		fx.reconcile()
		fx.requireNoMemberDeletes("the replacement delay")
		fx.advance(2 * time.Second)
		fx.reconcile()
		if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 1 || d[0].name != "data-f-1" {
			t.Fatalf("an original member that served and then cannot start must be replaced after the delay; claim deletes: %v", d)
		}
		// On its fresh disk it still cannot start: that disk never served.
		for range 4 {
			fx.kube.step(fx.ctx)
			fx.reconcile()
		}
		fx.requireDiskReplaced("data-f-1", disk)
		if _, marked := fx.pods()["f-1"].Annotations[celldv1alpha1.AnnotationServedOn]; marked {
			t.Fatal("a member that was never Ready on its fresh disk must not be marked as served")
		}
		fx.advance(3 * testDelay)
		fx.reconcile()
		if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 1 {
			t.Fatalf("a member on a fresh replacement disk that cannot start must be left alone; claim deletes: %v", d)
		}
	})
	t.Run("original member that never served is left alone", func(t *testing.T) {
		fx := newFixture(t)
		fx.kube.down["f-1"] = true // never Ready on the disk created for it
		f := persistentFleet(fx.ns, 3)
		noPlacement(f)
		fx.create(f)
		fx.converge("f-0 and f-2 Ready", func() bool { return fx.readyMembers() == 2 })
		fx.advance(6 * time.Minute)
		fx.reconcile()
		fx.advance(3 * testDelay)
		fx.reconcile()
		fx.requireNoMemberDeletes("an original member that never served on its disk")
	})
}
