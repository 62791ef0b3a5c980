package main

import (
	"fmt"
	"log/slog"

	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cellfleet/cellfleet/internal/controller/fleet"
)

// setupControllers registers every controller with the manager. Each
// controller package owns its own wiring; this only passes the options.
func setupControllers(mgr ctrl.Manager, opts options) error {
	metrics, err := fleet.NewMetrics(crmetrics.Registry)
	if err != nil {
		return fmt.Errorf("register fleet metrics: %w", err)
	}
	r, err := fleet.New(mgr.GetClient(), mgr.GetScheme(), fleet.Options{
		MemberReplacementDelay: opts.memberReplacementDelay,
		APIReader:              mgr.GetAPIReader(),
		Recorder:               mgr.GetEventRecorder("celldfleet-operator"),
		Metrics:                metrics,
		Logger:                 slog.Default().With("controller", "celldfleet"),
	})
	if err != nil {
		return fmt.Errorf("fleet operator: %w", err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up fleet operator: %w", err)
	}
	return nil
}
