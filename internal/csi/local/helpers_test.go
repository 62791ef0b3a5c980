package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
)

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatalf("mkdir %s: %v", p, err)
	}
}

// fixture is a driver with its directories under one temp base.
type fixture struct {
	base, consumer, pods string
	d                    *local.Driver
	ctrl                 *local.Controller
	node                 *local.Node
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	csitest.RequireRoot(t)
	base := t.TempDir()
	csitest.CleanupMounts(t, base)
	f := &fixture{base: base, consumer: filepath.Join(base, "consumer"), pods: filepath.Join(base, "kubelet", "pods")}
	for _, dir := range []string{"data", "state", "kubelet/pods", "consumer"} {
		mkdir(t, filepath.Join(base, dir))
	}
	f.restart(t)
	return f
}

// restart drops the driver and loads a new one from the same state, as a
// restarted plugin process does.
func (f *fixture) restart(t *testing.T) {
	t.Helper()
	f.d = newDriver(t, f.base, f.consumer)
	f.ctrl, f.node = f.d.Controller(), f.d.Node()
}

func mountCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func (f *fixture) create(t *testing.T, name string) string {
	t.Helper()
	resp, err := f.ctrl.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: name, VolumeCapabilities: []*csi.VolumeCapability{mountCap()},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
	})
	if err != nil {
		t.Fatalf("CreateVolume %s: %v", name, err)
	}
	return resp.GetVolume().GetVolumeId()
}

func (f *fixture) publish(id, target, holder string) error {
	_, err := f.node.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: id, TargetPath: target, VolumeCapability: mountCap(),
		VolumeContext: map[string]string{local.HolderContextKey: holder},
	})
	return err
}

func (f *fixture) unpublish(id, target string) error {
	_, err := f.node.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
	return err
}

func (f *fixture) delete(id string) error {
	_, err := f.ctrl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id})
	return err
}

// expectCode fails unless err carries code and every fragment.
func expectCode(t *testing.T, what string, err error, code codes.Code, fragments ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s must answer %v, got %v (%v)", what, code, status.Code(err), err)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("%s must say %q, it said: %v", what, f, err)
		}
	}
}

func mounted(t *testing.T, p string) bool {
	t.Helper()
	ok, err := mountpath.IsMountPoint(mountpath.SelfMountInfo, p)
	if err != nil {
		t.Fatalf("read mount table: %v", err)
	}
	return ok
}
