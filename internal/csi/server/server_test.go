package server_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/server"
)

func TestParseEndpointAcceptsOnlyAbsoluteUnixSockets(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"unix:///csi/csi.sock", "/csi/csi.sock", true},
		{"/csi/csi.sock", "/csi/csi.sock", true},
		{"tcp://127.0.0.1:10000", "", false},
		{"unix://relative.sock", "", false},
		{"csi.sock", "", false},
		{"/csi/../csi.sock", "", false},
	}
	for _, tc := range cases {
		got, err := server.ParseEndpoint(tc.in)
		if tc.ok && (err != nil || got != tc.want) {
			t.Errorf("ParseEndpoint(%q) must give %q, got %q %v", tc.in, tc.want, got, err)
		}
		if !tc.ok && err == nil {
			t.Errorf("ParseEndpoint(%q) must be refused, got %q", tc.in, got)
		}
	}
}

type node struct{ csi.UnimplementedNodeServer }

func TestServerAnswersIdentityHealthAndCountsRPCs(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "csi.sock")
	reg := prometheus.NewRegistry()
	metrics := server.NewMetrics(reg, "test.driver")
	notReady := errors.New("data root missing")
	var readyErr error
	id := &server.Identity{Name: "test.driver", Version: "v1", Controller: true, Ready: func() error { return readyErr }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Serve(ctx, slog.Default(), socket, server.Services{Identity: id, Node: &node{}}, metrics)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ic := csi.NewIdentityClient(conn)
	info, err := ic.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	if err != nil || info.GetName() != "test.driver" || info.GetVendorVersion() != "v1" {
		t.Fatalf("GetPluginInfo must name the driver and version, got %v (%v)", info, err)
	}
	caps, err := ic.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil || len(caps.GetCapabilities()) != 1 ||
		caps.GetCapabilities()[0].GetService().GetType() != csi.PluginCapability_Service_CONTROLLER_SERVICE {
		t.Fatalf("a driver with a controller must advertise CONTROLLER_SERVICE only, got %v (%v)", caps, err)
	}
	if _, err := ic.Probe(ctx, &csi.ProbeRequest{}); err != nil {
		t.Fatalf("Probe of a ready driver: %v", err)
	}
	readyErr = notReady
	if _, err := ic.Probe(ctx, &csi.ProbeRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Probe of a driver that is not ready must fail with FAILED_PRECONDITION, got %v", err)
	}
	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("the gRPC health service must answer SERVING, got %v (%v)", hc, err)
	}
	if got := testutil.ToFloat64(metrics.Calls("/csi.v1.Identity/Probe", codes.OK)); got != 1 {
		t.Fatalf("metrics must count 1 successful Probe, got %v", got)
	}
	if got := testutil.ToFloat64(metrics.Calls("/csi.v1.Identity/Probe", codes.FailedPrecondition)); got != 1 {
		t.Fatalf("metrics must count 1 failed Probe, got %v", got)
	}
}
