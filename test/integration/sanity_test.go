package integration_test

import (
	"flag"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/csi/replicated/controller"
	"github.com/cellfleet/cellfleet/internal/csi/server"
	"github.com/cellfleet/cellfleet/internal/testenv/nodestack"
)

var sanityReport csitest.SanitySummary

var _ = ginkgo.ReportAfterSuite("cellfleet summary", func(r ginkgo.Report) {
	sanityReport = csitest.Summarise(r)
})

// TestControllerPassesCSISanityWithTheWholeStack: csi-sanity's Identity and
// Controller specs against the real CSI controller with the real volume
// controller, three real replica hosts and their real local drivers: every
// volume csi-sanity creates becomes Ready because its replicas really form
// a quorum. Played (nodestack): the kubelet's NODE Pods and the local
// provisioner. csi-sanity does not retry ABORTED as csi-provisioner does,
// so the controller waits up to a minute per call for Ready.
// (It lives here, not in internal/csi/replicated/controller: ginkgo runs one
// suite per process, and that package runs its stand-in suite.)
func TestControllerPassesCSISanityWithTheWholeStack(t *testing.T) {
	s := nodestack.New(t, env, hostBinary, "san-system")
	for i := range 3 {
		s.AddNode(fmt.Sprintf("san-node-%c", 'a'+i))
	}
	s.StartControllerOnFreePorts()
	s.StartHosts()
	s.PlayProvisioner()

	backing := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "san-local"}, Provisioner: local.DriverName,
		AllowVolumeExpansion: ptr.To(true), VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
	if err := env.Client.Create(s.Ctx, backing); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ctrl, err := controller.New(controller.Options{Client: env.Client, Reader: env.Client, ReplicaNamespace: s.NS, ReadyWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctrlSocket := csitest.Serve(t, filepath.Join(s.Dir, "controller"), server.Services{
		Identity:   &server.Identity{Name: replicated.DriverName, Version: "test", Controller: true, OnlineExpansion: true},
		Controller: ctrl,
	})

	// csi-sanity cleans up through a Node service; the replicated node
	// plugin serves it (no spec here stages, so its mount owner is never asked).
	base := filepath.Join(s.Dir, "sanity")
	csitest.MkdirAll(t, filepath.Join(base, "kubelet", "pods"), filepath.Join(base, "state"))
	node, err := replicated.New(replicated.Options{NodeID: "san-node-a", StateDir: filepath.Join(base, "state"),
		PathRoots: []string{filepath.Join(base, "kubelet")}, MountOwner: replicated.NewOwnerClient(filepath.Join(base, "owner.sock"))})
	if err != nil {
		t.Fatal(err)
	}
	nodeSocket := csitest.Serve(t, filepath.Join(base, "plugin"), server.Services{
		Identity: &server.Identity{Name: replicated.DriverName, Version: "test", Ready: node.Ready}, Node: node.Node()})

	cfg := sanity.NewTestConfig()
	cfg.Address = nodeSocket
	cfg.ControllerAddress = ctrlSocket
	cfg.TargetPath = filepath.Join(base, "kubelet", "pods", "target")
	cfg.StagingPath = filepath.Join(base, "kubelet", "pods", "staging")
	cfg.TestVolumeSize = 64 << 20
	cfg.IdempotentCount = 3
	cfg.TestVolumeParameters = map[string]string{
		string(controller.ParamBackingStorageClassName): backing.Name,
		string(controller.ParamPVCName):                 "sanity-claim",
		string(controller.ParamPVCNamespace):            "sanity",
	}
	if err := flag.Set("ginkgo.focus", `Controller Service|Identity Service`); err != nil {
		t.Fatalf("focus csi-sanity on the controller: %v", err)
	}
	start := time.Now()
	sanity.Test(t, cfg)
	t.Logf("csi-sanity against the whole stack took %s", time.Since(start).Round(time.Second))

	sanityReport.Log(t)
	sanityReport.RequirePassed(t,
		"Identity Service GetPluginInfo should return appropriate information",
		"CreateVolume should return appropriate values SingleNodeWriter WithCapacity 1Gi",
		"CreateVolume should not fail when requesting to create a volume with already existing name and same capacity",
		"CreateVolume should not fail when creating volume with maximum-length name",
		"DeleteVolume should return appropriate values (no optional values added)",
		"ValidateVolumeCapabilities should return appropriate values",
	)
}
