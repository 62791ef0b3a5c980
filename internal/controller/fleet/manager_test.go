package fleet_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cellfleet/cellfleet/internal/controller/fleet"
)

// TestOperatorRunsUnderManager proves SetupWithManager wires the reconciler
// and its watches: under a real controller-runtime manager a new fleet gets
// its StatefulSet without anyone calling Reconcile.
func TestOperatorRunsUnderManager(t *testing.T) {
	fx := newFixture(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := fleet.New(mgr.GetClient(), mgr.GetScheme(), fleet.Options{APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("celldfleet-test")})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("SetupWithManager: %v", err)
	}
	ctx, cancel := context.WithCancel(fx.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with %v", err)
		}
	})

	fx.create(persistentFleet(fx.ns, 3))
	deadline := time.Now().Add(waitBudget)
	for {
		s := &appsv1.StatefulSet{}
		err := env.Client.Get(fx.ctx, types.NamespacedName{Namespace: fx.ns, Name: fleetName}, s)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("under a manager the operator must create the fleet's StatefulSet; last error: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
