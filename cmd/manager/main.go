// Command manager runs cellfleet's controllers, one half per process
// (--controllers): the CelldFleet operator (fleet), or the ReplicatedVolume
// controller and the replicated driver's CSI controller (storage). Each half
// is its own Deployment with its own ServiceAccount and leader-election
// Lease (docs/decisions/0012-two-deployments.md). It owns no state of its
// own; everything it decides is read from, and written to, the Kubernetes
// API.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/apischeme"
)

// Leader election happens in the manager's own namespace ("system" before
// kustomize's namespace transform), so its permissions are a Role there, not
// part of any ClusterRole. Both halves' ServiceAccounts are bound to it.
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
		LeaderElectionID:        opts.controllers.leaderElectionID(),
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
	logStart(opts)
	ctx := ctrl.SetupSignalHandler()
	if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

func logStart(opts options) {
	if opts.controllers == controllersFleet {
		slog.Info("starting manager", "controllers", opts.controllers, "memberReplacementDelay", opts.memberReplacementDelay.String(),
			"fleetNamespaces", opts.fleetNamespaces, "leaderElect", opts.leaderElect)
		return
	}
	slog.Info("starting manager", "controllers", opts.controllers, "storageNamespace", opts.storageNamespace,
		"managerNamespace", opts.managerNamespace, "replicaRuntime", opts.replicaRuntime,
		"replicaReplacementDelay", opts.replicaReplacementDelay.String(), "replicaRebuildTimeout", opts.replicaRebuildTimeout.String(),
		"maxConcurrentReplacements", opts.maxReplacements, "orphanVolumeGrace", opts.orphanVolumeGrace.String(),
		"csiControllerSocket", opts.csiControllerSocket, "leaderElect", opts.leaderElect)
}

// cacheOptions restricts the informers of namespaced objects to where the
// half's Roles are bound. A cluster-wide watch, or a watch of a type in a
// namespace whose Role does not grant it, would be refused and the cache
// would never sync. The fleet half watches only the fleet namespaces, where
// the fleet Role is bound. The storage half watches only the storage
// namespace, where the volume Role is bound; of its Leases only the replica
// hosts' heartbeats (labelled with their node) are cached. Either half's
// leader-election Lease is read by its own client, and Secrets are never
// cached: the volume controller reads them one by one through the API
// reader.
func cacheOptions(opts options) cache.Options {
	if opts.controllers == controllersFleet {
		fleet := map[string]cache.Config{}
		for _, n := range opts.fleetNamespaces {
			fleet[n] = cache.Config{}
		}
		return cache.Options{DefaultNamespaces: fleet}
	}
	storage := map[string]cache.Config{opts.storageNamespace: {}}
	return cache.Options{
		DefaultNamespaces: storage,
		ByObject: map[client.Object]cache.ByObject{
			&coordinationv1.Lease{}: {Namespaces: storage, Label: hostLeases},
		},
	}
}

// hostLeases selects the replica hosts' Leases: each carries its node's
// label (internal/replica/kubehost/lease.go).
var hostLeases = func() labels.Selector {
	req, err := labels.NewRequirement(storagev1alpha1.LabelNode, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key: never
	}
	return labels.NewSelector().Add(*req)
}()
