package fleet_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// gateBlocker puts an unrelated gate of a running fleet in the way, and names
// the Blocked reason it must report.
type gateBlocker struct {
	name   string
	reason celldv1alpha1.ConditionReason
	block  func(fx *fixture)
}

var unrelatedBlockers = []gateBlocker{
	{"edited Service", celldv1alpha1.ReasonInfrastructureBlocked, func(fx *fixture) {
		svc := &corev1.Service{}
		fx.must(fx.get(fleetName, svc))
		svc.Spec.Selector = map[string]string{"app": "someone-else"}
		fx.must(env.Client.Update(fx.ctx, svc))
	}},
	{"missing ServiceAccount", celldv1alpha1.ReasonInvalidConfiguration, func(fx *fixture) {
		fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.ServiceAccountName = "absent" })
	}},
}

// TestHealingNotBlockedByUnrelatedGate proves that self-healing does not wait
// on the other gates (docs/fleet-operator.md, "Self-healing"): with the fleet
// Blocked by an edited Service or a missing ServiceAccount, a stranded member
// Pod is still force-deleted and a lost volume still replaced, and the Healing
// condition says so while Blocked keeps the unrelated reason.
func TestHealingNotBlockedByUnrelatedGate(t *testing.T) {
	for _, b := range unrelatedBlockers {
		t.Run(b.name+": stranded Pod force-deleted", func(t *testing.T) {
			fx := newFixture(t)
			fx.runningFleet(3, noPlacement)
			b.block(fx)
			fx.reconcile()
			fx.requireBlocked(b.reason)
			fx.kube.deadNodes[nodeOf("f-1")] = true
			fx.must(env.Client.Delete(fx.ctx, fx.pods()["f-1"]))
			pod := fx.pods()["f-1"]
			fx.clock.SetTime(pod.DeletionTimestamp.Add(2*time.Minute + time.Second))
			fx.rec.reset()
			fx.reconcile()
			dels := fx.rec.deletesOf("Pod")
			if len(dels) != 1 || !dels[0].force || dels[0].uid != string(pod.UID) {
				t.Fatalf("a stranded member Pod must be force-deleted while the fleet is Blocked by %s; Pod deletes: %+v", b.reason, dels)
			}
			fx.requireBlocked(b.reason)
			fx.requireHealing(celldv1alpha1.ReasonForceDeletedStranded, "f-1")
		})
		t.Run(b.name+": lost volume replaced", func(t *testing.T) {
			fx := newFixture(t)
			fx.runningFleet(3, noPlacement)
			before := fx.claimUIDs()
			b.block(fx)
			fx.reconcile()
			fx.requireBlocked(b.reason)
			fx.kube.markLost(fx.ctx, "data-f-1")
			fx.rec.reset()
			fx.reconcile()
			if d := fx.rec.deletesOf("PersistentVolumeClaim"); len(d) != 1 || d[0].name != "data-f-1" {
				t.Fatalf("a lost volume must be replaced while the fleet is Blocked by %s; claim deletes: %v", b.reason, d)
			}
			fx.requireDiskReplaced("data-f-1", string(before["data-f-1"]))
			fx.requireDiskKept("data-f-0", string(before["data-f-0"]))
			fx.requireBlocked(b.reason)
			fx.requireHealing(celldv1alpha1.ReasonReplacingMember, "f-1")
		})
	}
}

// requireHealing fails unless the Healing condition is True with reason and
// its message names member.
func (fx *fixture) requireHealing(reason celldv1alpha1.ConditionReason, member string) {
	fx.t.Helper()
	c := fx.condition(celldv1alpha1.ConditionHealing)
	if c.Status != metav1.ConditionTrue || c.Reason != string(reason) {
		fx.t.Fatalf("the fleet must report Healing=True with reason %s; got %s/%s: %s", reason, c.Status, c.Reason, c.Message)
	}
	if !strings.Contains(c.Message, member) {
		fx.t.Fatalf("the Healing message must name %s; got %q", member, c.Message)
	}
}
