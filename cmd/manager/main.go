// Command manager runs cellfleet's controllers: today the CelldFleet operator
// (the replicated-volume lifecycle, whose API types are installed, comes with
// its controller). It owns no state of its own; everything it decides is read
// from, and written to, the Kubernetes API.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/cellfleet/cellfleet/internal/apischeme"
)

// Leader election happens in the manager's own namespace ("system" before
// kustomize's namespace transform), so its permissions are a Role there, not
// part of any ClusterRole.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="";events.k8s.io,namespace=system,resources=events,verbs=create;patch

func main() {
	if err := run(os.Args[1:]); err != nil {
		slog.Error("manager stopped", "err", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	opts, err := parseFlags(args)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: opts.logLevel}))
	slog.SetDefault(logger)
	ctrl.SetLogger(logr.FromSlogHandler(logger.Handler()))

	scheme, err := apischeme.New()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOptions(opts),
		Metrics:                 metricsOptions(opts),
		HealthProbeBindAddress:  opts.probeAddr,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        "manager.cellfleet.eric.dev",
		LeaderElectionNamespace: opts.leaderElectionNamespace,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add readiness check: %w", err)
	}
	if err := setupControllers(mgr, opts); err != nil {
		return err
	}
	slog.Info("starting manager", "memberReplacementDelay", opts.memberReplacementDelay.String(),
		"fleetNamespaces", opts.fleetNamespaces,
		"leaderElect", opts.leaderElect)
	ctx := ctrl.SetupSignalHandler()
	if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// cacheOptions restricts the informers of namespaced objects to the fleet
// namespaces: the fleet Role is bound only there, so a cluster-wide watch of
// Pods or claims would be refused (and would be broader than seed 002 allows).
func cacheOptions(opts options) cache.Options {
	ns := map[string]cache.Config{}
	for _, n := range opts.fleetNamespaces {
		ns[n] = cache.Config{}
	}
	return cache.Options{DefaultNamespaces: ns}
}
