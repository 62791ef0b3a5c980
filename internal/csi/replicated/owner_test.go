package replicated_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/csitest/loopowner"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
)

// TestStageTranslatesContextAndSecretsIntoTheOwnersMountRequest checks what
// reaches the mount owner over its socket protocol, and that an incomplete
// stage request or an absent owner gets the CSI code the spec names.
func TestStageTranslatesContextAndSecretsIntoTheOwnersMountRequest(t *testing.T) {
	csitest.RequireRoot(t)
	base := t.TempDir()
	kubelet := filepath.Join(base, "kubelet")
	csitest.MkdirAll(t, kubelet, filepath.Join(base, "owner-data", "rv-t"), filepath.Join(base, "state"))
	owner, ownerSocket := serveOwner(t, base)
	csitest.CleanupMounts(t, base)
	newNode := func(socket string) *replicated.Node {
		d, err := replicated.New(replicated.Options{NodeID: "node-a", StateDir: filepath.Join(base, "state"),
			PathRoots: []string{kubelet}, MountOwner: replicated.NewOwnerClient(socket)})
		if err != nil {
			t.Fatal(err)
		}
		return d.Node()
	}
	n, ctx := newNode(ownerSocket), context.Background()
	rwo := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	staging := filepath.Join(kubelet, "staging")
	stage := func(n *replicated.Node, vctx, secrets map[string]string) error {
		_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "rv-t", StagingTargetPath: staging,
			VolumeCapability: rwo, VolumeContext: vctx, Secrets: secrets})
		return err
	}

	refusals := []struct {
		name    string
		n       *replicated.Node
		vctx    map[string]string
		secrets map[string]string
		code    codes.Code
	}{
		{"no node-stage secrets", n, loopowner.VolumeContext("rv-t"), nil, codes.InvalidArgument},
		{"no endpoints in the volume context", n, map[string]string{}, loopowner.Secrets(), codes.InvalidArgument},
		{"malformed endpoints", n, map[string]string{replicated.ContextEndpoints: "[{"}, loopowner.Secrets(), codes.InvalidArgument},
		{"owner not listening", newNode(filepath.Join(base, "absent.sock")), loopowner.VolumeContext("rv-t"), loopowner.Secrets(), codes.Unavailable},
	}
	for _, r := range refusals {
		if err := stage(r.n, r.vctx, r.secrets); status.Code(err) != r.code {
			t.Fatalf("staging with %s must answer %v, got %v", r.name, r.code, err)
		}
	}
	if got := len(owner.Requests()); got != 0 {
		t.Fatalf("an incomplete stage request must not reach the owner, it got %d", got)
	}

	if err := stage(n, loopowner.VolumeContext("rv-t"), loopowner.Secrets()); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	reqs := owner.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the owner must receive exactly one mount request, got %d", len(reqs))
	}
	r := reqs[0]
	if r.VolumeID != "rv-t" || r.Target != staging || len(r.Endpoints) != 3 || r.Token != loopowner.TestToken ||
		r.CAPEM == "" || !r.SingleWriter || r.ReadOnly {
		t.Fatalf("the mount request must carry the volume, staging path, 3 endpoints, CA, token and single-writer mode; got %+v", r)
	}
	if err := stage(n, loopowner.VolumeContext("rv-t"), loopowner.Secrets()); err != nil {
		t.Fatalf("repeating NodeStageVolume must be idempotent: %v", err)
	}
	if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "rv-t", StagingTargetPath: staging}); err != nil {
		t.Fatalf("NodeUnstageVolume: %v", err)
	}
	if len(owner.List()) != 0 {
		t.Fatalf("unstage must end the owner's session, it holds %v", owner.List())
	}
}
