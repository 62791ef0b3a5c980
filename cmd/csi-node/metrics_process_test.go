package main

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/local"
)

// TestPluginServesMetricsAndHealth: with --metrics-address the plugin
// serves Prometheus metrics counting its RPCs and a /healthz that answers
// 200 while the driver is ready.
func TestPluginServesMetricsAndHealth(t *testing.T) {
	base := t.TempDir()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	startPlugin(t, filepath.Join(base, "csi.sock"), "--driver="+local.DriverName, "--data-root="+filepath.Join(base, "data"),
		"--state-dir="+filepath.Join(base, "state"), "--kubelet-dir="+filepath.Join(base, "kubelet"), "--metrics-address="+addr)

	get := func(path string) (int, string, error) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	const probeCounted = `cellfleet_csi_rpc_total{code="OK",driver="local.storage.eric.dev",method="/csi.v1.Identity/Probe"}`
	csitest.WaitFor(t, "/metrics counts the Probe calls startPlugin made", 10*time.Second, func() (bool, error) {
		code, body, err := get("/metrics")
		return err == nil && code == http.StatusOK && strings.Contains(body, probeCounted), err
	})
	code, body, err := get("/healthz")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/healthz of a ready plugin must answer 200, got %d %q (%v)", code, body, err)
	}
}
