package controller_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/replicated/controller"
	"github.com/cellfleet/cellfleet/internal/testenv"
)

// storageControllerUser is the storage controller's ServiceAccount as the
// API server names it: the CSI controller runs there (docs/install.md, "Two
// Deployments").
const storageControllerUser = "system:serviceaccount:cellfleet-system:cellfleet-storage-controller"

// TestGeneratedRBACIsEnoughForEveryRPC installs the roles generated from
// this package's markers (config/rbac/csi-controller), binds them to the
// storage controller's ServiceAccount as the kustomization does, and runs every RPC as
// that ServiceAccount (impersonated): a verb missing from the markers shows
// as a Forbidden answer here, not first on a cluster.
func TestGeneratedRBACIsEnoughForEveryRPC(t *testing.T) {
	ensureStorageNamespace(t)
	ctx := testContext(t)
	for _, f := range []string{"role.yaml", "role_binding.yaml"} {
		applyManifest(t, ctx, filepath.Join(testenv.RepoRoot(), "config", "rbac", "csi-controller", f))
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: storageControllerUser}
	asManager, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The API server's RBAC cache takes the new bindings a moment later:
	// wait until the ServiceAccount's get of a volume is judged as allowed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := asManager.Get(ctx, client.ObjectKey{Name: "no-such-volume"}, &storagev1alpha1.ReplicatedVolume{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the generated roles must let the storage controller get ReplicatedVolumes: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling the RBAC cache, bounded by the deadline
	}
	h := serveWith(t, asManager, asManager, 300*time.Millisecond)
	class := backingClass(t, true)
	publishCapacity(t, class, 10*gi, 10*gi, 10*gi)
	name := unique("pvc")
	cleanupVolume(t, name)

	allowed := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.OK && status.Code(err) != codes.Aborted {
			t.Fatalf("%s as the storage controller's ServiceAccount with the generated RBAC must not fail, got %v", what, err)
		}
	}
	_, err = h.ctrl.CreateVolume(ctx, createRequest(name, class, gi))
	allowed("CreateVolume before Ready", err)
	standInVolumeController(t, name, true)
	_, err = h.ctrl.CreateVolume(ctx, createRequest(name, class, gi))
	allowed("CreateVolume once Ready (lists VolumeReplicas)", err)
	_, err = h.ctrl.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: map[string]string{"backingStorageClassName": class}})
	allowed("GetCapacity", err)
	_, err = h.ctrl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: name,
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}})
	allowed("ValidateVolumeCapabilities", err)
	_, err = h.ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: name, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gi}})
	allowed("ControllerExpandVolume", err)
	_, err = h.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: name})
	allowed("DeleteVolume", err)
	if getVolume(t, name) != nil {
		t.Fatalf("DeleteVolume as the storage controller must remove volume %s", name)
	}
	// And the grants are narrow: the ServiceAccount cannot read Secrets or
	// touch claims, which are the volume controller's.
	var secrets corev1.SecretList
	if err := asManager.List(ctx, &secrets, client.InNamespace(storageNamespace)); !apierrors.IsForbidden(err) {
		t.Fatalf("the CSI controller's roles must not grant Secret reads, got %v", err)
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: storageNamespace, Name: unique("claim")}}
	if err := asManager.Delete(ctx, claim); !apierrors.IsForbidden(err) {
		t.Fatalf("the CSI controller's roles must not grant claim deletes, got %v", err)
	}
}

// serveWith starts a controller that writes through w and reads through r.
func serveWith(t *testing.T, w client.Client, r client.Reader, wait time.Duration) *harness {
	t.Helper()
	c, err := controller.New(controller.Options{Client: w, Reader: r, ReplicaNamespace: storageNamespace, ReadyWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	return serveController(t, c, &deleteRecorder{Client: w, t: t})
}

// applyManifest creates every object of a YAML file (already existing ones
// are left as they are).
func applyManifest(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	if err := env.ApplyFile(ctx, path); err != nil {
		t.Fatal(err)
	}
}
