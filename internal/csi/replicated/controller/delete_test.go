package controller_test

import (
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// teardownFinalizer stands for the volume controller's finalizer: the test
// holds the volume with it as the volume controller would during teardown.
const teardownFinalizer = "storage.eric.dev/volume-teardown"

func TestDeleteVolumeSucceedsOnlyOnceTheVolumeIsGone(t *testing.T) {
	h := serve(t, 300*time.Millisecond)
	class := backingClass(t, true)
	name := unique("pvc")
	cleanupVolume(t, name)
	_, _ = h.ctrl.CreateVolume(testContext(t), createRequest(name, class, gi))
	standInVolumeController(t, name, true)
	if _, err := h.ctrl.CreateVolume(testContext(t), createRequest(name, class, gi)); err != nil {
		t.Fatal(err)
	}
	// The test plays the volume controller: its finalizer holds the volume.
	rv := getVolume(t, name)
	rv.Finalizers = append(rv.Finalizers, teardownFinalizer)
	if err := env.Client.Update(testContext(t), rv); err != nil {
		t.Fatal(err)
	}
	uid := rv.UID

	_, err := h.ctrl.DeleteVolume(testContext(t), &csi.DeleteVolumeRequest{VolumeId: name})
	expectCode(t, "DeleteVolume while the volume controller tears the volume down", err, codes.Aborted,
		"waiting for the volume controller's ordered teardown")
	rv = getVolume(t, name)
	if rv == nil || rv.DeletionTimestamp == nil || rv.UID != uid {
		t.Fatalf("DeleteVolume must request deletion of volume %s (UID %s) and leave it to the finalizer, got %+v", name, uid, rv)
	}
	if h.writes.deletes.Load() != 1 {
		t.Fatalf("DeleteVolume must delete the ReplicatedVolume once, deleted %d times", h.writes.deletes.Load())
	}
	_, err = h.ctrl.DeleteVolume(testContext(t), &csi.DeleteVolumeRequest{VolumeId: name})
	expectCode(t, "a repeated DeleteVolume during teardown", err, codes.Aborted, "ordered teardown")
	if h.writes.deletes.Load() != 1 {
		t.Fatalf("a DeleteVolume repeated during teardown must not delete again, deleted %d times", h.writes.deletes.Load())
	}

	// The volume controller finishes: the finalizer goes, so does the object.
	rv.Finalizers = nil
	if err := env.Client.Update(testContext(t), rv); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ctrl.DeleteVolume(testContext(t), &csi.DeleteVolumeRequest{VolumeId: name}); err != nil {
		t.Fatalf("DeleteVolume once the volume is gone must succeed, got %v", err)
	}
	if _, err := h.ctrl.DeleteVolume(testContext(t), &csi.DeleteVolumeRequest{VolumeId: name}); err != nil {
		t.Fatalf("DeleteVolume of a deleted volume must succeed (idempotent), got %v", err)
	}
}

func TestDeleteVolumeOfUnknownIDsSucceedsAndOfHandMadeVolumesIsRefused(t *testing.T) {
	h := serve(t, 200*time.Millisecond)
	for _, id := range []string{"pvc-never-created", "Not_A_Volume_Name", strings.Repeat("x", 70)} {
		if _, err := h.ctrl.DeleteVolume(testContext(t), &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatalf("DeleteVolume of %q, which names no volume, must succeed, got %v", id, err)
		}
	}
	_, err := h.ctrl.DeleteVolume(testContext(t), &csi.DeleteVolumeRequest{})
	expectCode(t, "DeleteVolume without an ID", err, codes.InvalidArgument, "volume_id is required")

	// A volume an administrator made by hand has no CSI name: a DeleteVolume
	// naming it (a stale or forged PV) must not remove it.
	hand := &storagev1alpha1.ReplicatedVolume{ObjectMeta: metav1.ObjectMeta{Name: unique("by-hand")},
		Spec: storagev1alpha1.ReplicatedVolumeSpec{AccessMode: storagev1alpha1.AccessReadWriteOnce, Replicas: 1,
			Capacity: resource.MustParse("1Gi"), BackingStorageClassName: "local",
			Source: storagev1alpha1.ClaimReference{Namespace: "app", Name: "data"}}}
	create(t, hand)
	_, err = h.ctrl.DeleteVolume(testContext(t), &csi.DeleteVolumeRequest{VolumeId: hand.Name})
	expectCode(t, "DeleteVolume of a volume not provisioned through CSI", err, codes.FailedPrecondition, "not provisioned through CSI")
	if rv := getVolume(t, hand.Name); rv == nil || rv.DeletionTimestamp != nil {
		t.Fatalf("a volume not provisioned through CSI must stay, got %+v", rv)
	}
}
