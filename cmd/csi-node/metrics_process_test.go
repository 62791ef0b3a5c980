package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

// TestPluginServesMetricsAndHealth: with --metrics-address the plugin
// serves Prometheus metrics counting its RPCs and a /healthz that answers
// 200 while the driver is ready.
func TestPluginServesMetricsAndHealth(t *testing.T) {
	base := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", proccluster.FreePorts(t, 1))
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
	poll.Until(t, 10*time.Second, "/metrics counts the Probe calls startPlugin made", func() error {
		code, body, err := get("/metrics")
		switch {
		case err != nil:
			return err
		case code != http.StatusOK || !strings.Contains(body, probeCounted):
			return fmt.Errorf("/metrics answered %d without %s", code, probeCounted)
		}
		return nil
	})
	code, body, err := get("/healthz")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/healthz of a ready plugin must answer 200, got %d %q (%v)", code, body, err)
	}
}
