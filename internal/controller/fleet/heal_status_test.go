package fleet_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// requireHealingWaits fails unless Healing is False with reason and its
// message contains each of parts.
func (fx *fixture) requireHealingWaits(reason celldv1alpha1.ConditionReason, parts ...string) {
	fx.t.Helper()
	c := fx.condition(celldv1alpha1.ConditionHealing)
	if c.Status != metav1.ConditionFalse || c.Reason != string(reason) {
		fx.t.Fatalf("the fleet must report Healing=False with reason %s; got %s/%s: %s", reason, c.Status, c.Reason, c.Message)
	}
	for _, p := range parts {
		if !strings.Contains(c.Message, p) {
			fx.t.Fatalf("the Healing message must name %q; got %q", p, c.Message)
		}
	}
}

// memberStatus is the fleet's status.members record of the named member.
func (fx *fixture) memberStatus(name string) celldv1alpha1.MemberStatus {
	fx.t.Helper()
	for _, m := range fx.fleet().Status.Members {
		if m.Name == name {
			return m
		}
	}
	fx.t.Fatalf("status.members has no record of %s", name)
	return celldv1alpha1.MemberStatus{}
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// TestHealingNamesDownMemberSinceWhenAndWhenItWillBeReplaced proves that
// while one member waits out the replacement delay, Healing names it, since
// when it has been down and when it will be replaced, and status.members
// records that time; the fleet is not reported as having no member to heal.
func TestHealingNamesDownMemberSinceWhenAndWhenItWillBeReplaced(t *testing.T) {
	fx := newFixture(t)
	fx.restartedOnOldDisks(3)
	fx.memberGoesDown("f-1")
	fx.advance(time.Minute)
	fx.reconcile()
	rec := fx.memberStatus("f-1")
	if rec.DownSince == nil {
		t.Fatal("status.members must record since when f-1 has been down")
	}
	due := rec.DownSince.Add(testDelay)
	fx.requireHealingWaits(celldv1alpha1.ReasonMemberAwaitingReplacement, "f-1", rfc3339(rec.DownSince.Time), rfc3339(due))
	if rec.ReplacementDue == nil || !rec.ReplacementDue.Time.Equal(due) {
		t.Fatalf("status.members must record that f-1's replacement is due at %s; got %v", rfc3339(due), rec.ReplacementDue)
	}
	for _, other := range []string{"f-0", "f-2"} {
		if r := fx.memberStatus(other); r.ReplacementDue != nil || r.DownSince != nil {
			t.Fatalf("a Ready member must have no down time or replacement due; %s has %+v", other, r)
		}
	}
}

// TestHealingSaysWhyADownMemberIsNotReplaced proves each rule that keeps a
// down member's disk has its own Healing reason, and its message names the
// member and since when it has been down.
func TestHealingSaysWhyADownMemberIsNotReplaced(t *testing.T) {
	t.Run("two members down", func(t *testing.T) {
		fx := newFixture(t)
		fx.restartedOnOldDisks(3)
		fx.memberGoesDown("f-1")
		fx.memberGoesDown("f-2")
		fx.advance(3 * testDelay)
		fx.reconcile()
		f1, f2 := fx.memberStatus("f-1"), fx.memberStatus("f-2")
		fx.requireHealingWaits(celldv1alpha1.ReasonMembersDown, "f-1", "f-2",
			rfc3339(f1.DownSince.Time), rfc3339(f2.DownSince.Time), "only copy")
		if f1.ReplacementDue != nil || f2.ReplacementDue != nil {
			t.Fatalf("no replacement may be due while two members are down; got %v and %v", f1.ReplacementDue, f2.ReplacementDue)
		}
	})
	t.Run("member waiting on its image", func(t *testing.T) {
		fx := newFixture(t)
		fx.restartedOnOldDisks(3)
		fx.kube.waiting["f-1"] = "ImagePullBackOff"
		fx.memberGoesDown("f-1")
		fx.advance(testDelay + time.Minute)
		fx.reconcile()
		fx.requireHealingWaits(celldv1alpha1.ReasonMemberWaitingOnConfiguration, "f-1", "ImagePullBackOff",
			rfc3339(fx.memberStatus("f-1").DownSince.Time))
	})
	t.Run("member never Ready on its revision", func(t *testing.T) {
		fx := newFixture(t)
		_, rev := fx.stuckRollout()
		fx.waitOut(3)
		fx.requireHealingWaits(celldv1alpha1.ReasonMemberWaitingOnRevision, "f-2", rev,
			rfc3339(fx.memberStatus("f-2").DownSince.Time))
	})
	t.Run("fresh disk waiting on the scheduler", func(t *testing.T) {
		fx := newFixture(t)
		fx.runningFleet(3, noPlacement)
		fx.kube.markLost(fx.ctx, "data-f-1")
		fx.must(env.Client.Delete(fx.ctx, fx.pods()["f-2"]))
		fx.reconcile()
		fx.requireHealingWaits(celldv1alpha1.ReasonReplacementWaitingOnScheduler, "f-1", "scheduler")
	})
	t.Run("member on a disk that never served", func(t *testing.T) {
		fx := newFixture(t)
		fx.kube.down["f-1"] = true // never Ready on the disk created for it
		f := persistentFleet(fx.ns, 3)
		noPlacement(f)
		fx.create(f)
		fx.converge("f-0 and f-2 Ready", func() bool { return fx.readyMembers() == 2 })
		fx.advance(3 * testDelay)
		fx.reconcile()
		fx.requireHealingWaits(celldv1alpha1.ReasonDiskNeverServed, "f-1", "data-f-1",
			rfc3339(fx.memberStatus("f-1").DownSince.Time))
	})
}
