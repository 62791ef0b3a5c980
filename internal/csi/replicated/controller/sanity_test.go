package controller_test

import (
	"context"
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"k8s.io/apimachinery/pkg/api/meta"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/csi/replicated/controller"
	"github.com/cellfleet/cellfleet/internal/csi/server"
)

var sanityReport csitest.SanitySummary

var _ = ginkgo.ReportAfterSuite("cellfleet summary", func(r ginkgo.Report) {
	sanityReport = csitest.Summarise(r)
})

// The same csi-sanity specs against the whole stack (the real volume
// controller, replica hosts and local drivers, nothing played but the
// kubelet and the local provisioner) run in test/integration
// (TestControllerPassesCSISanityWithTheWholeStack): ginkgo runs one suite
// per process, so that run cannot share this package with the one below.

// TestControllerPassesCSISanityWithStandInVolumeController runs csi-sanity's
// Identity and Controller specs against the controller on a real API server.
// The test plays the volume controller (not in this branch): a goroutine
// marks each new ReplicatedVolume Placed and Ready and creates its
// VolumeReplicas, as standInVolumeController does. Everything else (names,
// parameters, idempotency, deletion, expansion, capacity) is the
// controller's own.
func TestControllerPassesCSISanityWithStandInVolumeController(t *testing.T) {
	h := serve(t, 10*time.Second)
	class := backingClass(t, true)
	publishCapacity(t, class, 100*gi, 100*gi, 100*gi)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go playVolumeController(ctx, t)

	// csi-sanity cleans up through a Node service (NodeGetCapabilities after
	// every spec); the driver's real node plugin serves it beside the
	// controller, as csi-node does on each node. No spec here stages a volume,
	// so its mount owner is never asked.
	base := t.TempDir()
	csitest.MkdirAll(t, filepath.Join(base, "kubelet", "pods"), filepath.Join(base, "state"))
	node, err := replicated.New(replicated.Options{NodeID: "node-a", StateDir: filepath.Join(base, "state"),
		PathRoots: []string{filepath.Join(base, "kubelet")}, MountOwner: replicated.NewOwnerClient(filepath.Join(base, "owner.sock"))})
	if err != nil {
		t.Fatalf("start the replicated node plugin: %v", err)
	}
	nodeSocket := csitest.Serve(t, base, server.Services{
		Identity: &server.Identity{Name: replicated.DriverName, Version: "test", Ready: node.Ready}, Node: node.Node()})

	cfg := sanity.NewTestConfig()
	cfg.Address = nodeSocket
	cfg.ControllerAddress = h.socket
	cfg.TargetPath = filepath.Join(base, "kubelet", "pods", "target")
	cfg.StagingPath = filepath.Join(base, "kubelet", "pods", "staging")
	cfg.TestVolumeSize = gi
	cfg.TestVolumeExpandSize = 2 * gi
	cfg.IdempotentCount = 3
	cfg.TestVolumeParameters = map[string]string{
		string(controller.ParamBackingStorageClassName): class,
		string(controller.ParamPVCName):                 "sanity-claim",
		string(controller.ParamPVCNamespace):            "sanity",
	}
	if err := flag.Set("ginkgo.focus", `Controller Service|Identity Service|ExpandVolume \[Controller Server\]`); err != nil {
		t.Fatalf("focus csi-sanity on the controller: %v", err)
	}
	sanity.Test(t, cfg)

	sanityReport.Log(t)
	sanityReport.RequirePassed(t,
		"Identity Service GetPluginInfo should return appropriate information",
		"Identity Service Probe should return appropriate information",
		"CreateVolume should return appropriate values SingleNodeWriter WithCapacity 1Gi",
		"CreateVolume should not fail when requesting to create a volume with already existing name and same capacity",
		"CreateVolume should fail when requesting to create a volume with already existing name and different capacity",
		"CreateVolume should not fail when creating volume with maximum-length name",
		"DeleteVolume should succeed when an invalid volume id is used",
		"DeleteVolume should return appropriate values (no optional values added)",
		"ValidateVolumeCapabilities should return appropriate values",
		"ValidateVolumeCapabilities should fail when the requested volume does not exist",
		"GetCapacity should return capacity",
		"ExpandVolume [Controller Server] should work",
		"ExpandVolume [Controller Server] should fail if no capacity range is given",
	)
}

// playVolumeController marks every ReplicatedVolume that has no Ready
// condition Placed and Ready, until ctx ends (the test's stand-in).
func playVolumeController(ctx context.Context, t *testing.T) {
	for ctx.Err() == nil {
		var list storagev1alpha1.ReplicatedVolumeList
		if err := env.Client.List(ctx, &list); err == nil {
			for _, rv := range list.Items {
				if rv.DeletionTimestamp == nil && meta.FindStatusCondition(rv.Status.Conditions, storagev1alpha1.VolumeReady.String()) == nil {
					if err := standIn(ctx, rv.Name, true); err != nil && ctx.Err() == nil {
						t.Logf("stand-in volume controller: %v (retrying)", err)
					}
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond): // the stand-in's polling interval
		}
	}
}
