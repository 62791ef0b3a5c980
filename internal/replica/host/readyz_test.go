package host_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// /readyz says whether the host takes work: the mode's own check (in
// Kubernetes mode, its Lease renewed), not every worker's health
// (docs/decisions/0011-node-leases.md).
func TestReadyzFollowsTheModesCheckNotTheWorkers(t *testing.T) {
	h, err := host.New(host.Config{StateDir: t.TempDir(), Limits: host.DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Ready  bool   `json:"ready"`
			Reason string `json:"reason"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body.Reason
	}
	if code, _ := readyz(); code != http.StatusOK {
		t.Fatalf("an open host without a mode check answers /readyz %d, want 200", code)
	}
	h.SetReadiness(func() error { return errors.New("the host's Lease is not renewed yet") })
	if code, reason := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(reason, "Lease") {
		t.Fatalf("a host whose check fails answers /readyz %d (%q), want 503 naming why", code, reason)
	}
	h.SetReadiness(func() error { return nil })
	if code, _ := readyz(); code != http.StatusOK {
		t.Fatalf("a host whose check passes answers /readyz %d, want 200", code)
	}
}
