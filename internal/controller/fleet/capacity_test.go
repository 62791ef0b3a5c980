package fleet_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func withCapacity(mode celldv1alpha1.CapacityMode, minN, maxN, step int32) func(*celldv1alpha1.CelldFleet) {
	return func(f *celldv1alpha1.CelldFleet) {
		f.Spec.Placement = nil
		f.Spec.Capacity = &celldv1alpha1.Capacity{Mode: mode, MinReplicas: minN, MaxReplicas: maxN, Step: step}
	}
}

func (fx *fixture) annotate(key, value string) {
	fx.edit(func(f *celldv1alpha1.CelldFleet) {
		if f.Annotations == nil {
			f.Annotations = map[string]string{}
		}
		f.Annotations[key] = value
	})
}

func (fx *fixture) recommend(id string, n int32) {
	fx.annotate(celldv1alpha1.AnnotationCapacityRecommendation, fmt.Sprintf(`{"id":%q,"replicas":%d}`, id, n))
}

// evidence records survivor-capacity evidence observed age ago.
func (fx *fixture) evidence(n int32, age time.Duration) {
	at := fx.clock.Now().Add(-age).UTC().Format(time.RFC3339)
	fx.annotate(celldv1alpha1.AnnotationSurvivorCapacity, fmt.Sprintf(`{"replicas":%d,"observedAt":%q}`, n, at))
}

func (fx *fixture) reservationState() string {
	res := &celldv1alpha1.CelldStorageReservation{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Name: "bucket-" + fx.ns}, res); err != nil {
		fx.t.Fatal(err)
	}
	return res.Annotations[celldv1alpha1.AnnotationReservationState]
}

// TestExternalContractionNeedsSurvivorCapacityEvidence proves a contraction
// written through the scale subresource waits for fresh survivor-capacity
// evidence, reporting CapacityUncertain meanwhile.
func TestExternalContractionNeedsSurvivorCapacityEvidence(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, withCapacity(celldv1alpha1.CapacityExternal, 1, 5, 1))
	scale := &autoscalingv1.Scale{}
	f := fx.fleet()
	if err := env.Client.SubResource("scale").Get(fx.ctx, f, scale); err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 2
	if err := env.Client.SubResource("scale").Update(fx.ctx, f, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	fx.reconcile()
	if got := fx.appliedReplicas(); got != 3 {
		t.Fatalf("an External contraction without evidence must not be applied; the StatefulSet has %d", got)
	}
	fx.requireBlocked(celldv1alpha1.ReasonCapacityUncertain, "survivor-capacity")
	fx.evidence(2, 20*time.Minute)
	fx.reconcile()
	if got := fx.appliedReplicas(); got != 3 {
		t.Fatalf("stale survivor-capacity evidence must not allow a contraction; the StatefulSet has %d", got)
	}
	fx.evidence(2, time.Minute)
	fx.converge("contracted to 2 with evidence", fx.settled(2))
	fx.requireNotBlocked()
}

// TestAutomaticPolicyAppliesEachRecommendationOnceWithinBoundsAndStep proves
// Automatic growth by at most step per recommendation, once per
// recommendation, and contraction only with evidence.
func TestAutomaticPolicyAppliesEachRecommendationOnceWithinBoundsAndStep(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, withCapacity(celldv1alpha1.CapacityAutomatic, 2, 5, 1))
	fx.recommend("a", 9)
	fx.reconcile()
	if got := fx.fleet().Spec.Replicas; got != 4 {
		t.Fatalf("a recommendation of 9 must grow by one step (1) within maxReplicas; spec.replicas is %d", got)
	}
	fx.reconcile()
	if got := fx.fleet().Spec.Replicas; got != 4 {
		t.Fatalf("a recommendation must be applied once; spec.replicas went to %d", got)
	}
	if s := fx.reservationState(); !strings.Contains(s, `"id":"a"`) || !strings.Contains(s, `"to":4`) {
		t.Fatalf("the step must be recorded in the reservation's capacity history; got %s", s)
	}
	fx.recommend("b", 2)
	fx.reconcile()
	if got := fx.fleet().Spec.Replicas; got != 4 {
		t.Fatalf("an Automatic contraction without evidence must not be applied; spec.replicas is %d", got)
	}
	fx.requireBlocked(celldv1alpha1.ReasonCapacityUncertain)
	fx.evidence(2, time.Minute)
	fx.reconcile()
	if got := fx.fleet().Spec.Replicas; got != 3 {
		t.Fatalf("with evidence an Automatic contraction must step down by one; spec.replicas is %d", got)
	}
}

// TestPolicyAdditionSpanningKeptAndFreshDisksIsCutAtFirstRun proves a
// capacity addition over kept and fresh ordinals stops at the end of its
// first run and adds the rest only when the policy asks again.
func TestPolicyAdditionSpanningKeptAndFreshDisksIsCutAtFirstRun(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, withCapacity(celldv1alpha1.CapacityAutomatic, 1, 6, 4))
	fx.evidence(1, time.Minute)
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 2 })
	fx.converge("contracted to 2, keeping data-f-2", fx.settled(2))
	fx.recommend("x", 6)
	fx.reconcile()
	if got := fx.fleet().Spec.Replicas; got != 3 {
		t.Fatalf("an addition from 2 to 6 over a kept disk (2) and fresh ones (3-5) must be cut at 3; spec.replicas is %d", got)
	}
	fx.converge("grown to 3", fx.settled(3))
	if got := fx.fleet().Spec.Replicas; got != 3 {
		t.Fatalf("the rest is added only if the policy asks again; spec.replicas is %d", got)
	}
	fx.recommend("y", 6)
	fx.reconcile()
	if got := fx.fleet().Spec.Replicas; got != 6 {
		t.Fatalf("asked again, the policy adds the fresh run; spec.replicas is %d", got)
	}
}

// TestShadowAndScaleOutPolicies proves Shadow records decisions without
// applying them and ScaleOut never contracts.
func TestShadowAndScaleOutPolicies(t *testing.T) {
	t.Run("Shadow records only", func(t *testing.T) {
		fx := newFixture(t)
		fx.runningFleet(3, withCapacity(celldv1alpha1.CapacityShadow, 1, 5, 1))
		fx.recommend("s", 5)
		fx.reconcile()
		if got := fx.fleet().Spec.Replicas; got != 3 {
			t.Fatalf("Shadow must not change the replica count; spec.replicas is %d", got)
		}
		if s := fx.reservationState(); !strings.Contains(s, `"shadow":true`) {
			t.Fatalf("Shadow must record its decision in the capacity history; got %s", s)
		}
	})
	t.Run("ScaleOut never contracts", func(t *testing.T) {
		fx := newFixture(t)
		fx.runningFleet(3, withCapacity(celldv1alpha1.CapacityScaleOut, 1, 5, 1))
		fx.evidence(1, time.Minute)
		fx.recommend("down", 1)
		fx.reconcile()
		if got := fx.fleet().Spec.Replicas; got != 3 {
			t.Fatalf("ScaleOut must never contract; spec.replicas is %d", got)
		}
	})
}

// TestReservationAnnotationHoldsOnlyCapacityHistory proves fields written by
// earlier releases are dropped on the first write, the history is kept while
// the fleet has a capacity policy, and the annotation goes with it.
func TestReservationAnnotationHoldsOnlyCapacityHistory(t *testing.T) {
	fx := newFixture(t)
	f := persistentFleet(fx.ns, 3)
	withCapacity(celldv1alpha1.CapacityShadow, 1, 5, 1)(f)
	fx.create(f)
	legacy := `{"capacity":[{"id":"old","from":1,"to":2,"at":"2026-01-01T00:00:00Z"}],"claims":{"data-f-0":"u"},"strictOperations":["x"],"lastDisruption":"2026-01-01T00:00:00Z"}`
	res := &celldv1alpha1.CelldStorageReservation{}
	res.Name = "bucket-" + fx.ns
	res.Annotations = map[string]string{celldv1alpha1.AnnotationReservationState: legacy}
	res.Spec = celldv1alpha1.CelldStorageReservationSpec{Bucket: res.Name,
		Fleet: celldv1alpha1.FleetReference{Namespace: fx.ns, Name: fleetName, UID: string(fx.fleet().UID)}}
	if err := env.Client.Create(fx.ctx, res); err != nil {
		t.Fatal(err)
	}
	fx.reconcile()
	var state map[string]any
	if err := json.Unmarshal([]byte(fx.reservationState()), &state); err != nil {
		t.Fatal(err)
	}
	if _, ok := state["capacity"]; !ok || len(state) != 1 {
		t.Fatalf("the annotation must hold the capacity history alone; got %v", state)
	}
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.Capacity = nil })
	fx.reconcile()
	if s := fx.reservationState(); s != "" {
		t.Fatalf("without a capacity policy the annotation must be removed; got %s", s)
	}
}
