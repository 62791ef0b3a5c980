package fleet_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/fleet"
)

// TestStatusDerivedFromClusterAndGaugesRemovedWithFleet proves status reports
// the cluster's counts and conditions, the per-fleet gauges follow it, and a
// deleted fleet's series are removed.
func TestStatusDerivedFromClusterAndGaugesRemovedWithFleet(t *testing.T) {
	fx := newFixture(t)
	reg := prometheus.NewRegistry()
	metrics, err := fleet.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	fx.op, err = fleet.New(fx.rec, env.Scheme, fleet.Options{MemberReplacementDelay: testDelay, Clock: fx.clock,
		APIReader: env.Client, Recorder: fx.evts, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	fx.runningFleet(3, noPlacement)
	fx.reconcile()
	f := fx.fleet()
	st := f.Status
	if st.ObservedGeneration != f.Generation || st.DesiredReplicas != 3 || st.AppliedReplicas != 3 || st.ReadyReplicas != 3 ||
		st.Replicas != 3 || st.UpdatedReplicas != 3 || st.Selector != celldv1alpha1.LabelFleet+"=f" {
		t.Fatalf("status must report the cluster's counts; got %+v", st)
	}
	want := map[celldv1alpha1.ConditionType]struct {
		status metav1.ConditionStatus
		reason celldv1alpha1.ConditionReason
	}{
		celldv1alpha1.ConditionReady:             {metav1.ConditionTrue, celldv1alpha1.ReasonMembersReady},
		celldv1alpha1.ConditionProgressing:       {metav1.ConditionFalse, celldv1alpha1.ReasonConverged},
		celldv1alpha1.ConditionBlocked:           {metav1.ConditionFalse, celldv1alpha1.ReasonNotBlocked},
		celldv1alpha1.ConditionMaintenancePaused: {metav1.ConditionFalse, celldv1alpha1.ReasonNotPaused},
		celldv1alpha1.ConditionDeleting:          {metav1.ConditionFalse, celldv1alpha1.ReasonNotDeleting},
	}
	for typ, w := range want {
		c := findCondition(f, typ)
		if c.Status != w.status || c.Reason != string(w.reason) {
			t.Errorf("condition %s must be %s/%s; got %s/%s", typ, w.status, w.reason, c.Status, c.Reason)
		}
	}
	series := `{fleet="f",namespace="` + fx.ns + `"}`
	expect := `
# HELP cellfleet_fleet_applied_replicas Members written to the fleet's workload.
# TYPE cellfleet_fleet_applied_replicas gauge
cellfleet_fleet_applied_replicas` + series + ` 3
# HELP cellfleet_fleet_blocked 1 while the fleet's Blocked condition is True.
# TYPE cellfleet_fleet_blocked gauge
cellfleet_fleet_blocked` + series + ` 0
# HELP cellfleet_fleet_blocked_age_seconds Seconds since the fleet became Blocked (0 when not blocked).
# TYPE cellfleet_fleet_blocked_age_seconds gauge
cellfleet_fleet_blocked_age_seconds` + series + ` 0
# HELP cellfleet_fleet_desired_replicas Members the fleet's spec asks for.
# TYPE cellfleet_fleet_desired_replicas gauge
cellfleet_fleet_desired_replicas` + series + ` 3
# HELP cellfleet_fleet_ready_replicas Ready members.
# TYPE cellfleet_fleet_ready_replicas gauge
cellfleet_fleet_ready_replicas` + series + ` 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect), "cellfleet_fleet_applied_replicas", "cellfleet_fleet_blocked",
		"cellfleet_fleet_blocked_age_seconds", "cellfleet_fleet_desired_replicas", "cellfleet_fleet_ready_replicas"); err != nil {
		t.Errorf("the per-fleet gauges (desired, applied, ready, blocked, blocked age) must follow status: %v", err)
	}
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.ServiceAccountName = "absent" })
	fx.reconcile()
	fx.advance(90 * time.Second)
	fx.reconcile()
	if v := gaugeValue(t, reg, "cellfleet_fleet_blocked"); v != 1 {
		t.Errorf("the blocked gauge must be 1 while the fleet is Blocked; got %v", v)
	}
	if age := gaugeValue(t, reg, "cellfleet_fleet_blocked_age_seconds"); age < 90 || age >= 91 {
		t.Errorf("the blocked-age gauge must count the operator's clock since the fleet became Blocked; got %vs after 90s", age)
	}
	fx.edit(func(f *celldv1alpha1.CelldFleet) { f.Spec.ServiceAccountName = "" })
	fx.reconcile()

	fx.kube.down["f-0"] = true
	fx.kube.step(fx.ctx)
	fx.reconcile()
	if c := findCondition(fx.fleet(), celldv1alpha1.ConditionReady); c.Status != metav1.ConditionFalse {
		t.Errorf("Ready must turn False when a member is down; got %s", c.Status)
	}

	if err := env.Client.Delete(fx.ctx, fx.fleet()); err != nil {
		t.Fatal(err)
	}
	for range maxRounds {
		fx.reconcile()
		fx.kube.step(fx.ctx)
		if err := fx.get(fleetName, &celldv1alpha1.CelldFleet{}); apierrors.IsNotFound(err) {
			break
		}
	}
	fx.reconcile() // the fleet is gone
	if n := testutil.CollectAndCount(reg); n != 0 {
		t.Fatalf("a deleted fleet's gauges must be removed; %d series remain", n)
	}
}

// gaugeValue is the value of the one series of a gauge in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("gauge %s has no single series", name)
	return 0
}
