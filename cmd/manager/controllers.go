package main

import (
	"fmt"
	"log/slog"

	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cellfleet/cellfleet/internal/controller/fleet"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	csicontroller "github.com/cellfleet/cellfleet/internal/csi/replicated/controller"
	"github.com/cellfleet/cellfleet/internal/csi/server"
)

// version is the manager's version, set at build time with
// -ldflags "-X main.version=...".
var version = "dev"

// setupControllers registers the controllers of the half this process runs
// (--controllers). Each controller package owns its own wiring; this only
// passes the options.
func setupControllers(mgr ctrl.Manager, opts options) error {
	if opts.controllers == controllersStorage {
		if err := setupVolumeController(mgr, opts); err != nil {
			return err
		}
		return setupCSIController(mgr, opts)
	}
	return setupFleetOperator(mgr, opts)
}

func setupFleetOperator(mgr ctrl.Manager, opts options) error {
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

func setupVolumeController(mgr ctrl.Manager, opts options) error {
	metrics, err := volume.NewMetrics(crmetrics.Registry)
	if err != nil {
		return fmt.Errorf("register volume metrics: %w", err)
	}
	r, err := volume.New(mgr.GetClient(), mgr.GetScheme(), volume.Options{
		Namespace:                 opts.storageNamespace,
		ManagerNamespace:          opts.managerNamespace,
		ReplicaReplacementDelay:   opts.replicaReplacementDelay,
		ReplicaRebuildTimeout:     opts.replicaRebuildTimeout,
		MaxConcurrentReplacements: opts.maxReplacements,
		OrphanGracePeriod:         opts.orphanVolumeGrace,
		CertificateValidity:       opts.certificateValidity,
		APIReader:                 mgr.GetAPIReader(),
		Recorder:                  mgr.GetEventRecorder("volume-controller"),
		Metrics:                   metrics,
		Logger:                    slog.Default().With("controller", "replicatedvolume"),
	})
	if err != nil {
		return fmt.Errorf("volume controller: %w", err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up volume controller: %w", err)
	}
	return nil
}

// setupCSIController serves the replicated driver's CSI controller on
// --csi-controller-socket, when set, as a Runnable of the manager.
func setupCSIController(mgr ctrl.Manager, opts options) error {
	if opts.csiControllerSocket == "" {
		return nil
	}
	log := slog.Default().With("component", "csi-controller", "driver", replicated.DriverName)
	c, err := csicontroller.New(csicontroller.Options{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), ReplicaNamespace: opts.storageNamespace, Log: log,
	})
	if err != nil {
		return fmt.Errorf("CSI controller: %w", err)
	}
	srv := &csicontroller.Server{Socket: opts.csiControllerSocket, Controller: c, Version: version,
		Metrics: server.NewMetrics(crmetrics.Registry, replicated.DriverName), Log: log}
	if err := mgr.Add(srv); err != nil {
		return fmt.Errorf("add CSI controller: %w", err)
	}
	return nil
}
