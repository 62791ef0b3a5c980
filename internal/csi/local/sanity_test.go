package local_test

import (
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/csi/server"
)

var sanityReport csitest.SanitySummary

var _ = ginkgo.ReportAfterSuite("cellfleet summary", func(r ginkgo.Report) {
	sanityReport = csitest.Summarise(r)
})

// newDriver starts a local driver with its roots under base.
func newDriver(t *testing.T, base, consumerRoot string) *local.Driver {
	t.Helper()
	d, err := local.New(local.Options{
		NodeID: "node-a", DataRoot: filepath.Join(base, "data"), StateDir: filepath.Join(base, "state"),
		PathRoots: []string{filepath.Join(base, "kubelet")}, ConsumerRoot: consumerRoot,
	})
	if err != nil {
		t.Fatalf("start local driver: %v", err)
	}
	return d
}

func TestLocalDriverPassesCSISanity(t *testing.T) {
	csitest.RequireRoot(t)
	base := t.TempDir()
	csitest.CleanupMounts(t, base)
	for _, dir := range []string{"data", "state", "kubelet/pods"} {
		mkdir(t, filepath.Join(base, dir))
	}
	d := newDriver(t, base, "")
	socket := csitest.Serve(t, base, server.Services{
		Identity:   &server.Identity{Name: local.DriverName, Version: "test", Controller: true, Topology: true, Ready: d.Ready},
		Controller: d.Controller(), Node: d.Node(),
	})
	cfg := sanity.NewTestConfig()
	cfg.Address = socket
	cfg.TargetPath = filepath.Join(base, "kubelet", "pods", "target")
	cfg.StagingPath = filepath.Join(base, "kubelet", "staging")
	cfg.TestVolumeSize = 1 << 20
	cfg.IdempotentCount = 3
	sanity.Test(t, cfg)

	sanityReport.Log(t)
	sanityReport.RequirePassed(t,
		"Node Service should work",
		"Node Service should be idempotent",
		"Controller Service [Controller Server] CreateVolume should return appropriate values SingleNodeWriter NoCapacity",
		"Controller Service [Controller Server] DeleteVolume should succeed when an invalid volume id is used",
		"NodeGetVolumeHealth should return health for a valid volume",
		"GetCapacity should return capacity",
		"ValidateVolumeCapabilities should return appropriate values",
		"ListVolumes should fail when an invalid starting_token is passed",
		"ListVolumes check the presence of new volumes and absence of deleted ones in the volume list",
	)
}
