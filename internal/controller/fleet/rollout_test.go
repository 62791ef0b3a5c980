package fleet_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// requireNoMemberDeletes fails the test if the operator deleted any Pod or
// claim: ordinary rollouts and scaling are the StatefulSet's job.
func (fx *fixture) requireNoMemberDeletes(during string) {
	fx.t.Helper()
	for _, kind := range []string{"Pod", "PersistentVolumeClaim"} {
		if d := fx.rec.deletesOf(kind); len(d) > 0 {
			fx.t.Fatalf("the operator deleted %v during %s; only the StatefulSet may restart or remove members", d, during)
		}
	}
}

// TestOperatorDeletesNoPodOrClaimDuringRestartUpgradeScaleInAndGrowthBack
// proves the operator only edits the StatefulSet for a rolling restart, a
// runtime upgrade, a scale-in and a growth back, and every disk survives.
func TestOperatorDeletesNoPodOrClaimDuringRestartUpgradeScaleInAndGrowthBack(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, func(f *celldv1alpha1.CelldFleet) { f.Spec.Placement = nil })
	disks := fx.claimUIDs()
	// A long-running fleet: its disks are older than any Pod a rollout makes.
	var newest time.Time
	for _, c := range fx.claims() {
		if c.CreationTimestamp.After(newest) {
			newest = c.CreationTimestamp.Time
		}
	}
	wallClockPast(t, newest, time.Second)
	fx.rec.reset()

	steps := []struct {
		name string
		edit func(*celldv1alpha1.CelldFleet)
		n    int32
	}{
		{"a rolling restart", func(f *celldv1alpha1.CelldFleet) {
			f.Spec.Maintenance = &celldv1alpha1.Maintenance{RestartToken: "restart-1"}
		}, 3},
		{"a runtime upgrade", func(f *celldv1alpha1.CelldFleet) { f.Spec.RuntimeImage = newImage }, 3},
		{"a scale-in", func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 2 }, 2},
		{"a growth back", func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 3 }, 3},
	}
	for _, s := range steps {
		before := fx.sts().Status.UpdateRevision
		fx.edit(s.edit)
		fx.converge(s.name+" completed", fx.settled(s.n))
		fx.reconcile() // one reconcile after the StatefulSet finished
		if c := fx.condition(celldv1alpha1.ConditionProgressing); c.Status != metav1.ConditionFalse || c.Reason != string(celldv1alpha1.ReasonConverged) {
			t.Fatalf("one reconcile after the StatefulSet finished %s the fleet must report Progressing=False/Converged; got %s/%s: %s",
				s.name, c.Status, c.Reason, c.Message)
		}
		if c := fx.condition(celldv1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
			t.Fatalf("after %s the fleet must be Ready; got %s: %s", s.name, c.Status, c.Message)
		}
		if s.n == 3 && s.name != "a growth back" && fx.sts().Status.UpdateRevision == before {
			t.Fatalf("%s must change the StatefulSet's template", s.name)
		}
		fx.requireNoMemberDeletes(s.name)
		for name, uid := range disks {
			if got := fx.claimUIDs()[name]; got != uid {
				t.Fatalf("%s replaced or deleted disk %s (uid %s → %q); every restart, upgrade and scale-in keeps it", s.name, name, uid, got)
			}
		}
	}
	for _, w := range fx.rec.recorded() {
		if w.op != "update" && w.op != "status" {
			t.Errorf("the operator issued %s; rollouts and scaling need only StatefulSet updates", w)
		}
		if w.op == "update" && w.kind != "StatefulSet" {
			t.Errorf("the operator updated %s during rollouts and scaling; it must only edit the StatefulSet", w)
		}
	}
}

// TestUnchangedFleetCostsNoWrite proves a converged fleet is reconciled
// without a single API write.
func TestUnchangedFleetCostsNoWrite(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3)
	fx.reconcile() // status catches up with the last step
	// Admission plugins and webhooks mutate Pods; the operator owns only
	// what it renders and accepts them.
	for _, p := range fx.pods() {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations["sidecar.example.com/injected"] = "true"
		p.Labels["example.com/team"] = "storage"
		if err := env.Client.Update(fx.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	fx.rec.reset()
	fx.reconcile()
	fx.reconcile()
	if w := fx.rec.recorded(); len(w) != 0 {
		t.Fatalf("reconciling an unchanged fleet (with admission-mutated Pods) must write nothing; it wrote %v", w)
	}
}
