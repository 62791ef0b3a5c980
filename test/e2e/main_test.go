package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/test/e2e/cluster"
)

// The suites run against the local cluster of `make e2e` (or one brought up
// by `make cluster-up` with the manager deployed), or against any cluster
// E2E_KUBECONFIG names (package cluster). Without E2E=1 every suite skips;
// with it, a missing cluster fails the run loudly.
const (
	envEnable   = "E2E"
	envSummary  = "E2E_SUMMARY" // write the scenario summary (markdown table) to this file
	envManifest = "E2E_MANAGER" // manager manifest to apply before the suites (rendered from config/overlays/local)
	skipReason  = "E2E=1 not set: run make e2e"
)

// env is the cluster every suite uses; nil when E2E is not set.
var env *cluster.Cluster

func TestMain(m *testing.M) {
	if os.Getenv(envEnable) != "1" {
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute) // the manager, then the NODE DaemonSet
	c, err := cluster.Connect(ctx)
	if err == nil {
		err = deployManager(ctx, c, os.Getenv(envManifest))
	}
	if err == nil {
		err = waitNodeAgents(ctx, c)
	}
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "E2E=1 but the qualification cluster is not usable: %v\n", err)
		os.Exit(1)
	}
	env = c
	start := time.Now()
	code := m.Run()
	if path := os.Getenv(envSummary); path != "" {
		if err := writeSummary(path, time.Since(start)); err != nil {
			fmt.Fprintf(os.Stderr, "write summary %s: %v\n", path, err)
			code = 1
		}
	}
	os.Exit(code)
}

// requirePower skips the scenario, before it creates anything, on a cluster
// without one of the powers it needs, and names the power.
func requirePower(t *testing.T, powers ...cluster.Power) {
	t.Helper()
	c := requireCluster(t)
	for _, p := range powers {
		if !c.Has(p) {
			t.Skipf("needs the local cluster of make e2e for %s; %s=%s is another cluster", p, cluster.EnvKubeconfig, c.Kubeconfig)
		}
	}
}

// requireCluster skips the suite unless E2E=1 (TestMain has then connected).
func requireCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	if env == nil {
		t.Skip(skipReason)
	}
	return env
}
