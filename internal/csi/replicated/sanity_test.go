package replicated_test

import (
	"context"
	"encoding/json"
	"flag"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/csitest/loopowner"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/csi/server"
)

var sanityReport csitest.SanitySummary

var _ = ginkgo.ReportAfterSuite("cellfleet summary", func(r ginkgo.Report) {
	sanityReport = csitest.Summarise(r)
})

// testController stands in for the manager's CSI controller (built later):
// CreateVolume makes the loopback owner's backing directory so a volume can
// be staged, DeleteVolume removes it.
type testController struct {
	csi.UnimplementedControllerServer
	owner *loopowner.Owner
}

func (c *testController) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{
			Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}}}}}, nil
}

func (c *testController) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" || len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "name and capabilities are required")
	}
	id := "rv-" + csitest.ShortHash(req.GetName())
	if err := c.owner.CreateVolume(id); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
		VolumeContext: loopowner.VolumeContext(id)}}, nil
}

func (c *testController) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	return &csi.DeleteVolumeResponse{}, c.owner.DeleteVolume(req.GetVolumeId())
}

// serveOwner serves a loopback mount owner on a socket in this process.
func serveOwner(t *testing.T, base string) (*loopowner.Owner, string) {
	t.Helper()
	owner := loopowner.New(filepath.Join(base, "owner-data"))
	socket := filepath.Join(base, "owner.sock")
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- owner.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		<-done
		owner.UnmountAll()
	})
	return owner, socket
}

func TestReplicatedNodePassesCSISanity(t *testing.T) {
	csitest.RequireRoot(t)
	base := t.TempDir()
	csitest.MkdirAll(t, filepath.Join(base, "kubelet", "pods"), filepath.Join(base, "owner-data"), filepath.Join(base, "state"))
	owner, ownerSocket := serveOwner(t, base)
	// Registered after the owner so it runs first: a bind left on a FUSE
	// mount would keep the owner's session, and its shutdown, waiting.
	csitest.CleanupMounts(t, base)
	d, err := replicated.New(replicated.Options{NodeID: "node-a", StateDir: filepath.Join(base, "state"),
		PathRoots: []string{filepath.Join(base, "kubelet")}, MountOwner: replicated.NewOwnerClient(ownerSocket)})
	if err != nil {
		t.Fatal(err)
	}
	// Deployed, the driver's Controller service is the manager's; the node
	// identity advertises it here so csi-sanity runs the full node
	// lifecycle ("should work") against the stand-in controller.
	socket := csitest.Serve(t, base, server.Services{
		Identity: &server.Identity{Name: replicated.DriverName, Version: "test", Controller: true, Ready: d.Ready}, Node: d.Node(),
	})
	ctrlSocket := filepath.Join(base, "controller.sock")
	lis, err := net.Listen("unix", ctrlSocket)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	csi.RegisterControllerServer(gs, &testController{owner: owner})
	csi.RegisterIdentityServer(gs, &server.Identity{Name: replicated.DriverName, Version: "test", Controller: true})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	cfg := sanity.NewTestConfig()
	cfg.Address = socket
	cfg.ControllerAddress = ctrlSocket
	cfg.TargetPath = filepath.Join(base, "kubelet", "pods", "target")
	cfg.StagingPath = filepath.Join(base, "kubelet", "pods", "staging")
	cfg.TestVolumeSize = 1 << 20
	cfg.IdempotentCount = 3
	cfg.SecretsFile = secretsFile(t, base)
	// The controller here is a stand-in; only the plugin's services are
	// under test.
	if err := flag.Set("ginkgo.focus", "Node Service|Identity Service"); err != nil {
		t.Fatalf("focus csi-sanity on the node plugin: %v", err)
	}
	sanity.Test(t, cfg)

	sanityReport.Log(t)
	sanityReport.RequirePassed(t,
		"Node Service should work",
		"Node Service should be idempotent",
		"NodeStageVolume should fail when no volume id is provided",
		"NodeUnpublishVolume should remove target path",
		"NodeGetVolumeHealth should return health for a valid volume",
	)
}

// secretsFile writes csi-sanity's secrets: the node-stage secret carries
// the volume's CA and token, as the trust Secret does in a cluster.
func secretsFile(t *testing.T, dir string) string {
	t.Helper()
	raw, err := json.Marshal(map[string]map[string]string{"NodeStageVolumeSecret": loopowner.Secrets()})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
