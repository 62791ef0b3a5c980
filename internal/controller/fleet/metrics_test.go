package fleet_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/fleet"
)

// withMetrics gives the fixture an operator that records its metrics in a
// registry of its own.
func (fx *fixture) withMetrics() *prometheus.Registry {
	fx.t.Helper()
	reg := prometheus.NewRegistry()
	metrics, err := fleet.NewMetrics(reg)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.op, err = fleet.New(fx.rec, env.Scheme, fleet.Options{MemberReplacementDelay: testDelay, Clock: fx.clock,
		APIReader: env.Client, Recorder: fx.evts, Metrics: metrics})
	if err != nil {
		fx.t.Fatal(err)
	}
	return reg
}

// metricValue is the value of the one series of a gauge or counter in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		m := mf.GetMetric()[0]
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("metric %s has no single series", name)
	return 0
}

func requireMetric(t *testing.T, reg *prometheus.Registry, name string, want float64, after string) {
	t.Helper()
	if got := metricValue(t, reg, name); got != want {
		t.Fatalf("after %s, %s must be %v; got %v", after, name, want, got)
	}
}

// TestMetricsCountReplacementsForceDeletesAndAbortedHandoffsAndGaugeDownMembersAndHolds
// proves the counters of replacements, force-deletes and aborted handoffs
// count each once, the gauges follow the members down and the holds still in
// progress, and a deleted fleet's series are removed.
func TestMetricsCountReplacementsForceDeletesAndAbortedHandoffsAndGaugeDownMembersAndHolds(t *testing.T) {
	fx := newFixture(t)
	reg := fx.withMetrics()
	fx.runningFleet(3, noPlacement)
	requireMetric(t, reg, "cellfleet_fleet_members_down", 0, "every member Ready")

	fx.kube.deadNodes[nodeOf("f-2")] = true
	fx.must(env.Client.Delete(fx.ctx, fx.pods()["f-2"]))
	fx.clock.SetTime(fx.pods()["f-2"].DeletionTimestamp.Add(2*time.Minute + time.Second))
	fx.reconcile()
	fx.reconcile()
	requireMetric(t, reg, "cellfleet_fleet_force_deletes_total", 1, "a stranded Pod force-deleted")
	delete(fx.kube.deadNodes, nodeOf("f-2"))
	fx.converge("f-2 back", fx.settled(3))
	fx.advance(6 * time.Minute)
	fx.reconcile()
	fx.rec.reset()

	fx.memberGoesDown("f-1")
	requireMetric(t, reg, "cellfleet_fleet_members_down", 1, "f-1 went down")
	fx.advance(testDelay + time.Second)
	fx.rec.inject = injectAt(handoffWrites[1], failWrite) // the Pod delete, the commitment point
	_ = fx.tryReconcile()
	requireMetric(t, reg, "cellfleet_fleet_aborted_handoffs_total", 1, "a handoff whose Pod delete failed")
	requireMetric(t, reg, "cellfleet_fleet_member_replacements_total", 0, "an aborted handoff")

	claimDeletesFail := func(w write) fault {
		if w.op == "delete" && w.kind == "PersistentVolumeClaim" {
			return failWrite
		}
		return passThrough
	}
	fx.rec.inject = claimDeletesFail
	_ = fx.tryReconcile() // committed; its claim delete fails and the hold stays
	_ = fx.tryReconcile()
	requireMetric(t, reg, "cellfleet_fleet_replacement_holds", 1, "a committed hold whose claim delete keeps failing")
	requireMetric(t, reg, "cellfleet_fleet_member_replacements_total", 1, "a committed handoff")
	fx.rec.inject = nil
	fx.reconcile()
	requireMetric(t, reg, "cellfleet_fleet_replacement_holds", 0, "the hold settled")
	requireMetric(t, reg, "cellfleet_fleet_aborted_handoffs_total", 1, "the committed handoff finished")

	fx.must(env.Client.Delete(fx.ctx, fx.fleet()))
	fx.converge("the fleet deleted", func() bool {
		return apierrors.IsNotFound(env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: fleetName}, &celldv1alpha1.CelldFleet{}))
	})
	fx.reconcile()
	if n := testutil.CollectAndCount(reg); n != 0 {
		t.Fatalf("a deleted fleet's series must be removed, counters included; %d remain", n)
	}
}
