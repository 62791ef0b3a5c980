// Package server runs a CSI plugin's gRPC services on a unix socket: the
// Identity service, whichever Controller and Node services a driver supplies,
// the standard gRPC health service, structured request logs and Prometheus
// metrics for every RPC.
//
// It owns transport and observability only; it must never import a driver
// package (internal/csi/local, internal/csi/replicated), which depend on it.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Services are the CSI services one driver serves: Identity and at least one
// of Controller (the manager's replicated controller serves no Node) and Node.
type Services struct {
	Identity   *Identity
	Controller csi.ControllerServer
	Node       csi.NodeServer
}

// ParseEndpoint accepts "unix:///abs/path" or an absolute path and returns
// the socket path. Only unix sockets are served: the plugin is node-local.
func ParseEndpoint(endpoint string) (string, error) {
	p := endpoint
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return "", fmt.Errorf("parse endpoint %q: %w", endpoint, err)
		}
		if u.Scheme != "unix" {
			return "", fmt.Errorf("endpoint %q: only unix:// sockets are supported", endpoint)
		}
		if u.Host != "" {
			return "", fmt.Errorf("endpoint %q: write unix:///absolute/path (three slashes)", endpoint)
		}
		p = u.Path
	}
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return "", fmt.Errorf("endpoint %q: socket path must be absolute and clean", endpoint)
	}
	return p, nil
}

// Serve listens on the unix socket, serves until ctx ends, then stops
// gracefully. A stale socket file left by a killed plugin is replaced.
func Serve(ctx context.Context, log *slog.Logger, socket string, svc Services, metrics *Metrics) error {
	if svc.Identity == nil || (svc.Node == nil && svc.Controller == nil) {
		return errors.New("serve: the Identity service and a Controller or Node service are required")
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o750); err != nil {
		return fmt.Errorf("create socket directory: %w", err)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", socket, err)
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", socket, err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(logRPC(log), metrics.interceptor()))
	csi.RegisterIdentityServer(srv, svc.Identity)
	if svc.Node != nil {
		csi.RegisterNodeServer(srv, svc.Node)
	}
	if svc.Controller != nil {
		csi.RegisterControllerServer(srv, svc.Controller)
	}
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)

	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			hs.Shutdown()
			srv.GracefulStop()
		case <-done:
		}
	}()
	log.Info("csi: serving", "socket", socket, "driver", svc.Identity.Name)
	err = srv.Serve(lis)
	close(done)
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve %s: %w", socket, err)
	}
	return nil
}
