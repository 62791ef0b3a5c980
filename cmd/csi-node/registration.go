package main

// Kubelet plugin registration, done by the plugin itself: the module proxy
// serves no node-driver-registrar, so csi-node serves the kubelet's
// pluginregistration API beside its CSI socket
// (docs/decisions/0005-kubelet-registration.md).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	registerv1 "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// csiSpecVersions are the CSI versions GetInfo announces; the kubelet's CSI
// plugin handler accepts a driver whose list holds a 1.x version.
var csiSpecVersions = []string{"1.0.0"}

// Retry bounds after the kubelet reports a failed registration: the socket
// is removed and created again (the kubelet's plugin watcher registers every
// newly created socket), waiting longer after each failure.
const (
	registrationRetryFirst = time.Second
	registrationRetryMax   = time.Minute
	// servingWait bounds the wait for the plugin's own CSI socket before
	// the registration socket appears: the kubelet calls NodeGetInfo on the
	// endpoint as soon as GetInfo has answered.
	servingWait = 2 * time.Minute
)

// registrationSocket is where the kubelet's plugin watcher finds the
// registration socket of one driver, the name node-driver-registrar uses.
func registrationSocket(dir, driver string) string {
	return filepath.Join(dir, driver+"-reg.sock")
}

// registrar serves registerv1.Registration for one driver.
type registrar struct {
	registerv1.UnimplementedRegistrationServer
	log *slog.Logger
	// driver is the CSI driver name; endpoint the CSI socket path as the
	// kubelet sees it (the kubelet dials it, not the plugin's own path).
	driver, endpoint string
	// socket is the registration socket; csiSocket the plugin's own CSI
	// socket, waited for before registering.
	socket, csiSocket string
	// status carries the kubelet's verdicts from the RPC to run.
	status chan *registerv1.RegistrationStatus
}

func newRegistrar(log *slog.Logger, f *pluginFlags, csiSocket string) *registrar {
	return &registrar{
		log:    log.With("registration-socket", registrationSocket(f.registrationDir, f.driver)),
		driver: f.driver, endpoint: f.kubeletRegistrationPath,
		socket: registrationSocket(f.registrationDir, f.driver), csiSocket: csiSocket,
		status: make(chan *registerv1.RegistrationStatus, 1),
	}
}

// GetInfo tells the kubelet what registers: a CSI plugin, its name, the CSI
// endpoint to dial and the CSI versions it speaks.
func (r *registrar) GetInfo(context.Context, *registerv1.InfoRequest) (*registerv1.PluginInfo, error) {
	r.log.Info("csi: kubelet asked for plugin info", "endpoint", r.endpoint)
	return &registerv1.PluginInfo{Type: registerv1.CSIPlugin, Name: r.driver, Endpoint: r.endpoint,
		SupportedVersions: csiSpecVersions}, nil
}

// NotifyRegistrationStatus receives the kubelet's verdict. A refusal is
// logged and makes run register again after a backoff.
func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerv1.RegistrationStatus) (*registerv1.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		r.log.Info("csi: registered with the kubelet")
	} else {
		r.log.Error("csi: the kubelet refused the registration", "err", s.Error)
	}
	select {
	case r.status <- s:
	default: // a verdict is already pending: run acts on that one
	}
	return &registerv1.RegistrationStatusResponse{}, nil
}

// run waits until the plugin's CSI socket serves, then serves the
// registration socket until ctx ends and removes it (the kubelet
// deregisters the driver when its socket goes). It returns an error only
// when the socket cannot be served at all.
func (r *registrar) run(ctx context.Context) error {
	if err := waitServing(ctx, r.csiSocket, servingWait); err != nil {
		if ctx.Err() != nil {
			return nil // the plugin stopped before it served: its own error says why
		}
		return fmt.Errorf("registration: the CSI socket %s does not serve: %w", r.csiSocket, err)
	}
	retry := registrationRetryFirst
	for {
		wasRegistered, err := r.serveOnce(ctx)
		if err != nil || ctx.Err() != nil {
			return err
		}
		if wasRegistered {
			// Refused after having been registered: a new failure, not
			// the next of a series.
			retry = registrationRetryFirst
		}
		r.log.Info("csi: registering again", "after", retry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
		retry = min(2*retry, registrationRetryMax)
	}
}

// serveOnce serves one registration socket until ctx ends or the kubelet
// refuses the registration (then the socket is removed: a new one is the
// only way to make the kubelet try again). A registered plugin keeps its
// socket: a restarted kubelet registers it again through the same one.
// wasRegistered says whether the kubelet accepted it before refusing.
func (r *registrar) serveOnce(ctx context.Context) (wasRegistered bool, err error) {
	lis, err := listenRegistration(r.socket)
	if err != nil {
		return false, err
	}
	srv := grpc.NewServer()
	registerv1.RegisterRegistrationServer(srv, r)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	r.log.Info("csi: serving kubelet plugin registration", "driver", r.driver)
	defer func() {
		srv.GracefulStop()
		if rmErr := os.Remove(r.socket); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			r.log.Warn("csi: remove registration socket", "err", rmErr)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return wasRegistered, nil
		case err := <-served:
			return wasRegistered, fmt.Errorf("registration socket %s: %w", r.socket, err)
		case s := <-r.status:
			if !s.PluginRegistered {
				return wasRegistered, nil
			}
			wasRegistered = true
		}
	}
}

// listenRegistration listens on the registration socket, replacing a stale
// one a killed plugin left. Only root (the kubelet) may connect: whoever can
// reach it can make the plugin register again.
func listenRegistration(socket string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o750); err != nil {
		return nil, fmt.Errorf("create registration directory: %w", err)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale registration socket %s: %w", socket, err)
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", socket, err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("restrict registration socket %s: %w", socket, err)
	}
	return lis, nil
}

// waitServing waits until the gRPC health service on socket answers.
func waitServing(ctx context.Context, socket string, limit time.Duration) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// WaitForReady: the call waits for the socket to accept instead of
	// failing at once while the plugin is still starting.
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	return err
}
