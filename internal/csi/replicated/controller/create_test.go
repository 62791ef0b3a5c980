package controller_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/csi/replicated/controller"
	"github.com/cellfleet/cellfleet/internal/mountowner/api"
)

func TestCreateVolumeRefusesBadInputNamingIt(t *testing.T) {
	h := serve(t, time.Second)
	class := backingClass(t, true)
	capped := backingClass(t, true)
	publishCapacity(t, capped, 10*gi, 8*gi, 4*gi) // three replicas fit up to 4 GiB
	replicatedClass := unique("replicated")
	create(t, storageClassOf(replicatedClass, replicated.DriverName))

	cases := []struct {
		name      string
		edit      func(r *csi.CreateVolumeRequest)
		code      codes.Code
		fragments []string
	}{
		{"ReadWriteMany access mode", func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities = []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}
		}, codes.InvalidArgument, []string{"MULTI_NODE_MULTI_WRITER", "not supported"}},
		{"ReadOnlyMany access mode", func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities = []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)}
		}, codes.InvalidArgument, []string{"MULTI_NODE_READER_ONLY"}},
		{"a multi-node mode beside a single-node one", func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities = append(r.VolumeCapabilities, mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER))
		}, codes.InvalidArgument, []string{"MULTI_NODE_SINGLE_WRITER"}},
		{"block access", func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities = []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}
		}, codes.InvalidArgument, []string{"block access"}},
		{"no capabilities", func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities = nil },
			codes.InvalidArgument, []string{"volume_capabilities"}},
		{"zero replicas", func(r *csi.CreateVolumeRequest) { r.Parameters["replicas"] = "0" },
			codes.InvalidArgument, []string{`replicas="0"`, "from 1 to 5"}},
		{"six replicas", func(r *csi.CreateVolumeRequest) { r.Parameters["replicas"] = "6" },
			codes.InvalidArgument, []string{`replicas="6"`, "from 1 to 5"}},
		{"replicas not a number", func(r *csi.CreateVolumeRequest) { r.Parameters["replicas"] = "three" },
			codes.InvalidArgument, []string{`replicas="three"`}},
		{"a parameter typo", func(r *csi.CreateVolumeRequest) { delete(r.Parameters, "replicas"); r.Parameters["replica"] = "5" },
			codes.InvalidArgument, []string{`unknown StorageClass parameter "replica"`}},
		{"no backing class", func(r *csi.CreateVolumeRequest) { delete(r.Parameters, "backingStorageClassName") },
			codes.InvalidArgument, []string{"backingStorageClassName is required"}},
		{"a missing backing class", func(r *csi.CreateVolumeRequest) { r.Parameters["backingStorageClassName"] = "no-such-class" },
			codes.InvalidArgument, []string{`backing StorageClass "no-such-class"`, "does not exist"}},
		{"the replicated driver's own class as backing class", func(r *csi.CreateVolumeRequest) {
			r.Parameters["backingStorageClassName"] = replicatedClass
		}, codes.InvalidArgument, []string{replicatedClass, "node-local class"}},
		{"capacity 0", func(r *csi.CreateVolumeRequest) { r.CapacityRange = &csi.CapacityRange{} },
			codes.InvalidArgument, []string{"capacity 0 requested"}},
		{"no capacity range", func(r *csi.CreateVolumeRequest) { r.CapacityRange = nil },
			codes.InvalidArgument, []string{"capacity 0 requested"}},
		{"required above limit", func(r *csi.CreateVolumeRequest) {
			r.CapacityRange = &csi.CapacityRange{RequiredBytes: 2 * gi, LimitBytes: gi}
		},
			codes.InvalidArgument, []string{"required_bytes 2147483648 exceeds limit_bytes 1073741824"}},
		{"capacity past the backing class's limit", func(r *csi.CreateVolumeRequest) {
			r.Parameters["backingStorageClassName"] = capped
			r.CapacityRange = &csi.CapacityRange{RequiredBytes: 5 * gi}
		}, codes.OutOfRange, []string{"capacity 5368709120 bytes", "past backing StorageClass " + capped, "limit of 4294967296 bytes for 3 replicas"}},
		{"five replicas where three nodes publish capacity", func(r *csi.CreateVolumeRequest) {
			r.Parameters["backingStorageClassName"] = capped
			r.Parameters["replicas"] = "5"
		}, codes.OutOfRange, []string{"limit of 0 bytes for 5 replicas", "3 nodes publish capacity"}},
		{"no claim name (provisioner without --extra-create-metadata)", func(r *csi.CreateVolumeRequest) {
			delete(r.Parameters, "csi.storage.k8s.io/pvc/name")
		}, codes.InvalidArgument, []string{"csi.storage.k8s.io/pvc/name is missing", "--extra-create-metadata"}},
		{"no claim namespace", func(r *csi.CreateVolumeRequest) { delete(r.Parameters, "csi.storage.k8s.io/pvc/namespace") },
			codes.InvalidArgument, []string{"csi.storage.k8s.io/pvc/namespace is missing"}},
		{"a content source", func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "x"}}}
		}, codes.InvalidArgument, []string{"content sources"}},
		{"no name", func(r *csi.CreateVolumeRequest) { r.Name = "" }, codes.InvalidArgument, []string{"name is required"}},
		{"a name past 128 bytes", func(r *csi.CreateVolumeRequest) { r.Name = strings.Repeat("n", 129) },
			codes.InvalidArgument, []string{"129 bytes exceeds the CSI limit of 128"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := createRequest(unique("pvc-bad"), class, gi)
			tc.edit(req)
			_, err := h.ctrl.CreateVolume(testContext(t), req)
			expectCode(t, "CreateVolume with "+tc.name, err, tc.code, tc.fragments...)
			if req.Name != "" && len(req.Name) <= 128 {
				if rv := getVolume(t, controller.VolumeName(req.Name)); rv != nil {
					t.Fatalf("a refused CreateVolume (%s) must record no volume, but %s exists", tc.name, rv.Name)
				}
			}
		})
	}
}

func TestCreateVolumeAnswersAbortedUntilPlacedAndReadyThenReturnsTheVolume(t *testing.T) {
	h := serve(t, 300*time.Millisecond)
	class := backingClass(t, true)
	name := unique("pvc")
	cleanupVolume(t, name)
	req := createRequest(name, class, 3*gi)

	_, err := h.ctrl.CreateVolume(testContext(t), req)
	expectCode(t, "CreateVolume before the volume controller placed anything", err, codes.Aborted,
		"waiting for the volume controller to place 3 replicas", "Placed not reported yet")
	rv := getVolume(t, name)
	if rv == nil {
		t.Fatalf("CreateVolume must record ReplicatedVolume %s before it is Ready", name)
	}
	want := storagev1alpha1.ReplicatedVolumeSpec{AccessMode: storagev1alpha1.AccessReadWriteOnce, Replicas: 3,
		BackingStorageClassName: class, Source: storagev1alpha1.ClaimReference{Namespace: "app", Name: "data"}}
	if rv.Spec.AccessMode != want.AccessMode || rv.Spec.Replicas != 3 || rv.Spec.BackingStorageClassName != class ||
		rv.Spec.Source != want.Source || rv.Spec.Capacity.Value() != 3*gi {
		t.Fatalf("the volume must record the request (RWO, 3 replicas, 3 GiB, %s, app/data), got %+v", class, rv.Spec)
	}
	if rv.Annotations[controller.AnnotationCSIName] != name {
		t.Fatalf("the volume must keep its CSI name in %s, got %v", controller.AnnotationCSIName, rv.Annotations)
	}

	// The test plays the volume controller: placed, no coordinator yet.
	standInVolumeController(t, name, false)
	_, err = h.ctrl.CreateVolume(testContext(t), req)
	expectCode(t, "CreateVolume of a placed volume without a coordinator", err, codes.Aborted,
		"waiting for a coordinator to serve with a quorum of its 3 replicas", "Ready=False NoCoordinator")

	// A call waiting when the coordinator is elected returns the volume.
	slow := serve(t, 10*time.Second)
	done := make(chan error, 1)
	var resp *csi.CreateVolumeResponse
	go func() {
		var err error
		resp, err = slow.ctrl.CreateVolume(testContext(t), req)
		done <- err
	}()
	// Give the call time to be waiting (not a synchronisation: the check
	// below fails the test if it already answered).
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("CreateVolume of a volume that is not Ready must wait, not answer %v", err)
	default:
	}
	standInVolumeController(t, name, true)
	if err := <-done; err != nil {
		t.Fatalf("CreateVolume waiting when the volume becomes Ready must return it, got %v", err)
	}
	v := resp.GetVolume()
	if v.GetVolumeId() != name || v.GetCapacityBytes() != 3*gi {
		t.Fatalf("CreateVolume must return volume %s of %d bytes, got %v", name, 3*gi, v)
	}
	var eps []api.Endpoint
	if err := json.Unmarshal([]byte(v.GetVolumeContext()[replicated.ContextEndpoints]), &eps); err != nil || len(eps) != 3 {
		t.Fatalf("the volume context must list the 3 replicas' endpoints, got %v (%v)", v.GetVolumeContext(), err)
	}
	wantEp := api.Endpoint{ID: name + "-r1", Address: name + "-r1." + storageNamespace + ".svc:20001", ServerName: name + "-r1." + storageNamespace + ".svc"}
	if eps[1] != wantEp {
		t.Fatalf("endpoint of replica r1 must be its Service and port as the peers list it, %+v; got %+v", wantEp, eps[1])
	}
	if got := v.GetVolumeContext()[replicated.ContextCapacityBytes]; got != "3221225472" {
		t.Fatalf("the volume context must carry the capacity in bytes, got %q", got)
	}
}

func TestCreateVolumeIsIdempotentByName(t *testing.T) {
	h := serve(t, 300*time.Millisecond)
	class := backingClass(t, true)
	caps := publishCapacity(t, class, 10*gi, 10*gi, 10*gi)
	name := unique("pvc")
	cleanupVolume(t, name)
	req := createRequest(name, class, 2*gi)
	_, _ = h.ctrl.CreateVolume(testContext(t), req)
	standInVolumeController(t, name, true)

	first, err := h.ctrl.CreateVolume(testContext(t), req)
	if err != nil {
		t.Fatalf("CreateVolume of a Ready volume: %v", err)
	}
	// The volume's own backing claims now use the nodes' space; a retry must
	// not be refused for it (the limit is checked before the commit point).
	for _, c := range caps {
		c.Capacity.Set(0)
		if err := env.Client.Update(testContext(t), c); err != nil {
			t.Fatal(err)
		}
	}
	again, err := h.ctrl.CreateVolume(testContext(t), req)
	if err != nil || again.GetVolume().GetVolumeId() != first.GetVolume().GetVolumeId() {
		t.Fatalf("the same name and parameters must return the same volume %s, got %v (%v)", first.GetVolume().GetVolumeId(), again, err)
	}

	differ := []struct {
		what     string
		edit     func(r *csi.CreateVolumeRequest)
		fragment string
	}{
		{"replica count", func(r *csi.CreateVolumeRequest) { r.Parameters["replicas"] = "5" }, "replicas=3, requested 5"},
		{"capacity", func(r *csi.CreateVolumeRequest) { r.CapacityRange.RequiredBytes = 4 * gi }, "capacity 2147483648 bytes, outside the requested range [4294967296, 0]"},
		{"access mode", func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities = []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)}
		}, "access mode ReadWriteOnce, requested ReadWriteOncePod"},
		{"source claim", func(r *csi.CreateVolumeRequest) { r.Parameters["csi.storage.k8s.io/pvc/name"] = "other" }, "source claim app/data, requested app/other"},
	}
	for _, d := range differ {
		r := createRequest(name, class, 2*gi)
		d.edit(r)
		_, err := h.ctrl.CreateVolume(testContext(t), r)
		expectCode(t, "CreateVolume of an existing name with another "+d.what, err, codes.AlreadyExists, d.fragment)
	}
	if rv := getVolume(t, name); rv.Spec.Replicas != 3 || rv.Spec.Capacity.Value() != 2*gi {
		t.Fatalf("a refused CreateVolume must leave the volume as it was, got %+v", rv.Spec)
	}
}

func TestCreateVolumeDerivesAValidNameForLongCSINames(t *testing.T) {
	h := serve(t, 200*time.Millisecond)
	class := backingClass(t, true)
	long := "Sanity-Controller-" + strings.Repeat("x", 110) // 128 characters, upper case
	id := controller.VolumeName(long)
	cleanupVolume(t, id)
	req := createRequest(long, class, gi)
	req.VolumeCapabilities = []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)}
	_, err := h.ctrl.CreateVolume(testContext(t), req)
	expectCode(t, "CreateVolume before Ready", err, codes.Aborted, id)
	rv := getVolume(t, id)
	if rv == nil || len(id) > controller.MaxVolumeNameLength {
		t.Fatalf("a 128-character CSI name must become a ReplicatedVolume of at most %d characters, got %q (%v)", controller.MaxVolumeNameLength, id, rv)
	}
	if rv.Annotations[controller.AnnotationCSIName] != long || rv.Spec.AccessMode != storagev1alpha1.AccessReadWriteOncePod {
		t.Fatalf("the volume must keep the CSI name and record ReadWriteOncePod, got %v %s", rv.Annotations, rv.Spec.AccessMode)
	}
	standInVolumeController(t, id, true)
	resp, err := h.ctrl.CreateVolume(testContext(t), req)
	if err != nil || resp.GetVolume().GetVolumeId() != id {
		t.Fatalf("CreateVolume must return the derived volume ID %s, got %v (%v)", id, resp, err)
	}
}
