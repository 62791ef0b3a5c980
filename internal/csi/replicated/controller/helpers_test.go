package controller_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/csi/replicated/controller"
	"github.com/cellfleet/cellfleet/internal/csi/server"
)

// storageNamespace stands for the manager's --storage-namespace.
const storageNamespace = "cellfleet-storage"

const gi = int64(1) << 30

var seq atomic.Int64

// unique returns a fresh name with prefix, so tests never share objects.
func unique(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var nsOnce sync.Once

func ensureStorageNamespace(t *testing.T) {
	t.Helper()
	nsOnce.Do(func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: storageNamespace}}
		if err := env.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", storageNamespace, err)
		}
	})
}

// deleteRecorder is the API client the controller writes through. It
// fails the test on any delete that is not bound to the object's UID
// (STYLE.md: every delete a controller makes carries UID preconditions).
type deleteRecorder struct {
	client.Client
	t       *testing.T
	deletes atomic.Int64
}

func (d *deleteRecorder) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	o := &client.DeleteOptions{}
	o.ApplyOptions(opts)
	if o.Preconditions == nil || o.Preconditions.UID == nil || *o.Preconditions.UID != obj.GetUID() || obj.GetUID() == "" {
		d.t.Errorf("the CSI controller deleted %T %s without a precondition on its UID %q (options %+v)", obj, obj.GetName(), obj.GetUID(), o.Preconditions)
	}
	d.deletes.Add(1)
	return d.Client.Delete(ctx, obj, opts...)
}

// harness is one CSI controller served on a socket, and a client of it.
type harness struct {
	ctrl   csi.ControllerClient
	ident  csi.IdentityClient
	writes *deleteRecorder
	socket string
}

// serve starts a controller with the given wait for the volume controller.
func serve(t *testing.T, wait time.Duration) *harness {
	t.Helper()
	ensureStorageNamespace(t)
	rec := &deleteRecorder{Client: env.Client, t: t}
	c, err := controller.New(controller.Options{Client: rec, Reader: env.Client, ReplicaNamespace: storageNamespace, ReadyWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	return serveController(t, c, rec)
}

// serveController serves c on a socket and dials it.
func serveController(t *testing.T, c *controller.Controller, rec *deleteRecorder) *harness {
	t.Helper()
	socket := csitest.Serve(t, t.TempDir(), server.Services{
		Identity:   &server.Identity{Name: replicated.DriverName, Version: "test", Controller: true, OnlineExpansion: true},
		Controller: c,
	})
	conn := csitest.Dial(t, socket)
	if _, err := csi.NewIdentityClient(conn).GetPluginInfo(testContext(t), &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("the CSI controller must answer on its socket: %v", err)
	}
	return &harness{ctrl: csi.NewControllerClient(conn), ident: csi.NewIdentityClient(conn), writes: rec, socket: socket}
}

// backingClass creates a local.storage.eric.dev StorageClass.
func backingClass(t *testing.T, expandable bool) string {
	t.Helper()
	name := unique("local")
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: local.DriverName,
		AllowVolumeExpansion: ptr.To(expandable),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
	create(t, sc)
	return name
}

// publishCapacity creates the CSIStorageCapacity objects the local driver's
// per-node csi-provisioner (--enable-capacity) would publish for class: one
// per node, with that node's free bytes.
func publishCapacity(t *testing.T, class string, perNode ...int64) []*storagev1.CSIStorageCapacity {
	t.Helper()
	ensureStorageNamespace(t)
	var out []*storagev1.CSIStorageCapacity
	for i, b := range perNode {
		c := &storagev1.CSIStorageCapacity{
			ObjectMeta:       metav1.ObjectMeta{Namespace: storageNamespace, Name: unique("csisc")},
			StorageClassName: class,
			NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{local.TopologyKey: fmt.Sprintf("node-%d", i)}},
			Capacity:         resource.NewQuantity(b, resource.BinarySI),
		}
		create(t, c)
		out = append(out, c)
	}
	return out
}

// storageClassOf is a StorageClass of provisioner.
func storageClassOf(name, provisioner string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
}

// mountRWO is a ReadWriteOnce capability as csi-provisioner sends it.
func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
}

// createRequest is what csi-provisioner --extra-create-metadata sends for a
// claim of the replicated class.
func createRequest(name, class string, bytes int64) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: bytes},
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER)},
		Parameters: map[string]string{
			"replicas": "3", "backingStorageClassName": class,
			"csi.storage.k8s.io/pvc/name": "data", "csi.storage.k8s.io/pvc/namespace": "app",
			"csi.storage.k8s.io/pv/name": name,
		},
	}
}

// getVolume reads a ReplicatedVolume; nil when it does not exist.
func getVolume(t *testing.T, id string) *storagev1alpha1.ReplicatedVolume {
	t.Helper()
	rv := &storagev1alpha1.ReplicatedVolume{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Name: id}, rv)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get ReplicatedVolume %s: %v", id, err)
	}
	return rv
}

// cleanupVolume removes a volume (and any finalizer the test put on it).
func cleanupVolume(t *testing.T, id string) {
	t.Cleanup(func() {
		ctx := context.Background()
		rv := getVolume(t, id)
		if rv == nil {
			return
		}
		rv.Finalizers = nil
		_ = env.Client.Update(ctx, rv)
		_ = env.Client.Delete(ctx, rv)
	})
}

// expectCode fails unless err carries code and every fragment.
func expectCode(t *testing.T, what string, err error, code codes.Code, fragments ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s must answer %s, got %v", what, code, err)
	}
	for _, f := range fragments {
		if !strings.Contains(status.Convert(err).Message(), f) {
			t.Fatalf("%s must answer a message naming %q, got: %s", what, f, status.Convert(err).Message())
		}
	}
}

// standInVolumeController plays the volume controller, which is not part
// of these tests: it creates the volume's R VolumeReplicas (each listing
// the others as peers at their replica Services) and writes the Placed and
// Ready conditions it would report. ready=false reports a placed volume
// whose replicas have not elected a coordinator.
func standInVolumeController(t *testing.T, id string, ready bool) {
	t.Helper()
	if err := standIn(context.Background(), id, ready); err != nil {
		t.Fatalf("stand-in volume controller: %v", err)
	}
}

// standIn is standInVolumeController's body, usable from a goroutine.
func standIn(ctx context.Context, id string, ready bool) error {
	rv := &storagev1alpha1.ReplicatedVolume{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: id}, rv); err != nil {
		return fmt.Errorf("get volume %s: %w", id, err)
	}
	n := int(rv.Spec.Replicas)
	name := func(i int) string { return fmt.Sprintf("%s-r%d", id, i) }
	for i := 0; i < n; i++ {
		var peers []storagev1alpha1.ReplicaPeer
		for j := 0; j < n; j++ {
			if j != i {
				peers = append(peers, storagev1alpha1.ReplicaPeer{Name: name(j),
					Address: fmt.Sprintf("%s.%s.svc", name(j), storageNamespace), Port: int32(20000 + j)})
			}
		}
		vr := &storagev1alpha1.VolumeReplica{
			ObjectMeta: metav1.ObjectMeta{Namespace: storageNamespace, Name: name(i)},
			Spec: storagev1alpha1.VolumeReplicaSpec{VolumeName: id, Node: fmt.Sprintf("node-%d", i), Port: int32(20000 + i),
				Peers: peers, BackingClaimName: name(i), Generation: 1},
		}
		if err := env.Client.Create(ctx, vr); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create VolumeReplica %s: %w", vr.Name, err)
		}
	}
	readyStatus, reason := metav1.ConditionFalse, storagev1alpha1.ReasonNoCoordinator
	if ready {
		readyStatus, reason = metav1.ConditionTrue, storagev1alpha1.ReasonCoordinatorServing
	}
	meta.SetStatusCondition(&rv.Status.Conditions, metav1.Condition{Type: storagev1alpha1.VolumePlaced.String(),
		Status: metav1.ConditionTrue, Reason: storagev1alpha1.ReasonReplicasPlaced.String(), Message: "every replica placed",
		ObservedGeneration: rv.Generation})
	meta.SetStatusCondition(&rv.Status.Conditions, metav1.Condition{Type: storagev1alpha1.VolumeReady.String(),
		Status: readyStatus, Reason: reason.String(), Message: "stand-in volume controller", ObservedGeneration: rv.Generation})
	if err := env.Client.Status().Update(ctx, rv); err != nil {
		return fmt.Errorf("write status of %s: %w", id, err)
	}
	return nil
}
