package main

import (
	"fmt"
	"log/slog"

	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cellfleet/cellfleet/internal/controller/fleet"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
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
	return setupVolumeController(mgr, opts)
}

func setupVolumeController(mgr ctrl.Manager, opts options) error {
	metrics, err := volume.NewMetrics(crmetrics.Registry)
	if err != nil {
		return fmt.Errorf("register volume metrics: %w", err)
	}
	r, err := volume.New(mgr.GetClient(), mgr.GetScheme(), volume.Options{
		Namespace:               opts.storageNamespace,
		ManagerNamespace:        opts.managerNamespace,
		ReplicaReplacementDelay: opts.replicaReplacementDelay,
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorder("volume-controller"),
		Metrics:                 metrics,
		Logger:                  slog.Default().With("controller", "replicatedvolume"),
	})
	if err != nil {
		return fmt.Errorf("volume controller: %w", err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up volume controller: %w", err)
	}
	return nil
}
