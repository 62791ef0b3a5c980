package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/csi/publication"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/csi/server"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

func runPlugin(args []string) error {
	f, err := parsePluginFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: f.logLevel})).
		With("component", "csi-node", "driver", f.driver, "node", f.nodeID)
	socket, err := server.ParseEndpoint(f.endpoint)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.stateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	roots := append([]string{f.kubeletDir}, f.extraPathRoots...)
	var svc server.Services
	switch f.driver {
	case local.DriverName:
		if f.consumerRoot != "" {
			// Taken before any state is read: a second supervisor of the same
			// consumer root must not even look at publications.
			owner := fmt.Sprintf("pid=%d state-dir=%s node=%s", os.Getpid(), f.stateDir, f.nodeID)
			lock, err := publication.AcquireLock(f.consumerRoot, owner)
			if err != nil {
				return fmt.Errorf("consumer mount root %s: %w", f.consumerRoot, err)
			}
			defer lock.Release()
			if err := os.MkdirAll(f.consumerRoot, 0o750); err != nil {
				return fmt.Errorf("create consumer mount root: %w", err)
			}
		}
		if err := os.MkdirAll(f.dataRoot, 0o750); err != nil {
			return fmt.Errorf("create data root: %w", err)
		}
		d, err := local.New(local.Options{NodeID: f.nodeID, DataRoot: f.dataRoot, StateDir: f.stateDir,
			PathRoots: roots, ConsumerRoot: f.consumerRoot, Log: log})
		if err != nil {
			return err
		}
		svc = server.Services{
			Identity:   &server.Identity{Name: local.DriverName, Version: version, Controller: true, Topology: true, Ready: d.Ready},
			Controller: d.Controller(), Node: d.Node(),
		}
	case replicated.DriverName:
		d, err := replicated.New(replicated.Options{NodeID: f.nodeID, StateDir: f.stateDir, PathRoots: roots,
			MountOwner: replicated.NewOwnerClient(f.mountOwner), Log: log})
		if err != nil {
			return err
		}
		svc = server.Services{
			Identity: &server.Identity{Name: replicated.DriverName, Version: version, Ready: d.Ready},
			Node:     d.Node(),
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := server.NewMetrics(reg, f.driver)
	if f.metricsAddress != "" {
		stopHTTP, err := serveMetrics(log, f.metricsAddress, reg, svc.Identity.Ready)
		if err != nil {
			return err
		}
		defer stopHTTP()
	}
	if f.registrationDir == "" {
		return server.Serve(ctx, log, socket, svc, metrics)
	}
	// The registration lives as long as the CSI server: a registration
	// socket that cannot be served stops the plugin, so the DaemonSet
	// restarts it rather than running unregistered.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	registered := make(chan error, 1)
	go func() {
		err := newRegistrar(log, f, socket).run(ctx)
		if err != nil {
			cancel(err)
		}
		registered <- err
	}()
	serveErr := server.Serve(ctx, log, socket, svc, metrics)
	cancel(nil)
	return errors.Join(serveErr, <-registered)
}

// serveMetrics serves /metrics and /healthz on addr.
func serveMetrics(log *slog.Logger, addr string, reg *prometheus.Registry, ready func() error) (func(), error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("csi: metrics listener stopped", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
