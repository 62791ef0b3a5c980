package integration_test

// The whole storage stack on one envtest API server (docs/csi.md, "Tests"): a
// PVC's CreateVolume through the real CSI controller (called over its unix
// socket as csi-provisioner calls it, with the --extra-create-metadata
// parameters), the real volume controller in-process, three real replica-host
// processes each with the real local driver of its node
// (internal/testenv/nodestack), until CreateVolume returns the volume; then
// the replicated node plugin with the real mount owner stages and publishes
// it from the volume context and the mount Secret and mounts FUSE; a write,
// fsync and read back through the mount; unpublish, unstage, DeleteVolume,
// and everything removed.
//
// Played, because envtest has none of them: the kubelet (NODE Pods ready),
// the local csi-provisioner and PV controller (nodestack), csi-provisioner
// handing NodeStage the mount Secret (read here by its name), and cluster
// DNS: the volume context names each replica by its Service's DNS name,
// which the test resolves to the replica's EndpointSlice address (what
// cluster DNS and the Service proxy route to); the TLS server name stays
// the Service name, so each worker's certificate is still verified.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/csi/replicated/controller"
	"github.com/cellfleet/cellfleet/internal/csi/server"
	"github.com/cellfleet/cellfleet/internal/mountowner"
	"github.com/cellfleet/cellfleet/internal/mountowner/api"
	"github.com/cellfleet/cellfleet/internal/testenv/nodestack"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

const mib = int64(1) << 20

func mountCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func TestAPVCsCreateVolumeReachesReadyAndMountsThroughTheWholeStack(t *testing.T) {
	s := nodestack.New(t, env, hostBinary, "ws-system")
	for i := range 3 {
		s.AddNode(fmt.Sprintf("ws-node-%c", 'a'+i))
	}
	s.StartControllerOnFreePorts()
	s.StartHosts()
	ctx := s.Ctx

	backing := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "ws-local"}, Provisioner: local.DriverName,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
	if err := env.Client.Create(ctx, backing); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ctrl, err := controller.New(controller.Options{Client: env.Client, Reader: env.Client, ReplicaNamespace: s.NS})
	if err != nil {
		t.Fatal(err)
	}
	ctrlSocket := csitest.Serve(t, filepath.Join(s.Dir, "controller"), server.Services{
		Identity:   &server.Identity{Name: replicated.DriverName, Version: "test", Controller: true},
		Controller: ctrl,
	})
	cc := csitest.ControllerClient(csitest.Dial(t, ctrlSocket))

	// csi-provisioner retries CreateVolume while it answers ABORTED; the
	// backing claims are provisioned meanwhile (played, as the local
	// provisioner would).
	name := "pvc-0b7c1f52-ws"
	req := &csi.CreateVolumeRequest{
		Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: 64 * mib},
		VolumeCapabilities: []*csi.VolumeCapability{mountCap()},
		Parameters: map[string]string{
			string(controller.ParamBackingStorageClassName): backing.Name,
			string(controller.ParamReplicas):                "3",
			string(controller.ParamPVCName):                 "data",
			string(controller.ParamPVCNamespace):            "app",
			string(controller.ParamPVName):                  name,
		},
	}
	start := time.Now()
	var vol *csi.Volume
	poll.Until(t, 3*time.Minute, "CreateVolume returns the volume", func() error {
		resp, err := cc.CreateVolume(ctx, req)
		if err == nil {
			vol = resp.GetVolume()
			return nil
		}
		if status.Code(err) != codes.Aborted {
			t.Fatalf("CreateVolume must answer ABORTED until the volume is Ready, got %v", err)
		}
		var rvs storagev1alpha1.ReplicatedVolumeList
		if err := env.Client.List(ctx, &rvs); err != nil {
			return err
		}
		for _, rv := range rvs.Items {
			claims := &corev1.PersistentVolumeClaimList{}
			if err := env.Client.List(ctx, claims, client.InNamespace(s.NS), client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
				return err
			}
			if len(claims.Items) == int(rv.Spec.Replicas) {
				s.ProvisionClaims(rv.Name, int(rv.Spec.Replicas))
			}
		}
		return err
	})
	elapsed := time.Since(start)
	t.Logf("CreateVolume to Ready (the call returning the volume): %s", elapsed.Round(time.Millisecond))
	if vol.GetCapacityBytes() != 64*mib {
		t.Errorf("volume capacity %d, want %d", vol.GetCapacityBytes(), 64*mib)
	}
	rvName := vol.GetVolumeId()
	rv := &storagev1alpha1.ReplicatedVolume{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: rvName}, rv); err != nil {
		t.Fatalf("the ReplicatedVolume of volume ID %s: %v", rvName, err)
	}
	if rv.Spec.Replicas != 3 || rv.Spec.Source.Name != "data" || rv.Spec.Source.Namespace != "app" {
		t.Errorf("ReplicatedVolume spec %+v", rv.Spec)
	}
	if n := len(s.Replicas(rv.Name)); n != 3 {
		t.Fatalf("%d VolumeReplicas, want 3", n)
	}

	// The mount side: the replicated node plugin with the real mount owner.
	base := filepath.Join(s.Dir, "mountside")
	kubelet := filepath.Join(base, "kubelet")
	staging := filepath.Join(kubelet, "plugins", "staging", "vol")
	target := filepath.Join(kubelet, "pods", "app", "mount")
	csitest.MkdirAll(t, filepath.Dir(staging), filepath.Dir(target), filepath.Join(base, "plugin-state"))
	owner, err := mountowner.New(mountowner.Config{StateDir: filepath.Join(base, "owner-state"), NodeName: "ws-node-a"})
	if err != nil {
		t.Fatal(err)
	}
	ownerSocket := filepath.Join(base, "owner.sock")
	octx, ocancel := context.WithCancel(context.Background())
	odone := make(chan error, 1)
	go func() { odone <- owner.Serve(octx, ownerSocket) }()
	t.Cleanup(func() { ocancel(); <-odone })
	csitest.CleanupMounts(t, base) // registered after the owner: runs before it stops
	plugin, err := replicated.New(replicated.Options{NodeID: "ws-node-a", StateDir: filepath.Join(base, "plugin-state"),
		PathRoots: []string{kubelet}, MountOwner: replicated.NewOwnerClient(ownerSocket)})
	if err != nil {
		t.Fatal(err)
	}
	nodeSocket := csitest.Serve(t, filepath.Join(base, "plugin"), server.Services{
		Identity: &server.Identity{Name: replicated.DriverName, Version: "test", Ready: plugin.Ready}, Node: plugin.Node()})
	nc := csitest.NodeClient(csitest.Dial(t, nodeSocket))

	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: s.NS, Name: rv.Name + "-mount"}, secret); err != nil {
		t.Fatalf("the volume's mount Secret: %v", err)
	}
	secrets := map[string]string{}
	for k, v := range secret.Data {
		secrets[k] = string(v)
	}
	vctx := resolveEndpoints(t, ctx, s.NS, vol.GetVolumeContext())
	if _, err := nc.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: rvName, StagingTargetPath: staging,
		VolumeCapability: mountCap(), VolumeContext: vctx, Secrets: secrets}); err != nil {
		t.Fatalf("NodeStageVolume through the real mount owner: %v", err)
	}
	if _, err := nc.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: rvName, StagingTargetPath: staging,
		TargetPath: target, VolumeCapability: mountCap(), VolumeContext: vctx}); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	payload := bytes.Repeat([]byte("cellfleet whole stack\n"), 4096)
	f, err := os.Create(filepath.Join(target, "hello.txt"))
	if err != nil {
		t.Fatalf("create through the mount: %v", err)
	}
	if _, err := f.Write(payload); err != nil {
		t.Fatalf("write through the mount: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync through the mount: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(target, "hello.txt"))
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("read back through the mount: %d bytes (%v), want %d", len(got), err, len(payload))
	}
	if _, err := nc.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: rvName, TargetPath: target}); err != nil {
		t.Fatalf("NodeUnpublishVolume: %v", err)
	}
	if _, err := nc.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: rvName, StagingTargetPath: staging}); err != nil {
		t.Fatalf("NodeUnstageVolume: %v", err)
	}

	// DeleteVolume: csi-provisioner retries while it answers ABORTED; the
	// PVs are reclaimed (played) once their claims are released, which the
	// local driver refuses while a host still holds the publication.
	poll.Until(t, 3*time.Minute, "DeleteVolume succeeds and everything is removed", func() error {
		_, derr := cc.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: rvName})
		if derr != nil && status.Code(derr) != codes.Aborted {
			t.Fatalf("DeleteVolume: %v", derr)
		}
		left, err := s.Reclaim(rv.Name)
		if err != nil {
			return err
		}
		if derr != nil {
			return derr
		}
		var what []string
		if left > 0 {
			what = append(what, fmt.Sprintf("%d PVs", left))
		}
		if len(s.Replicas(rv.Name)) > 0 {
			what = append(what, "VolumeReplicas")
		}
		for _, l := range []client.ObjectList{&corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}, &corev1.SecretList{}} {
			if err := env.Client.List(ctx, l, client.InNamespace(s.NS), client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
				return err
			}
			if meta.LenList(l) > 0 {
				what = append(what, fmt.Sprintf("%T", l))
			}
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: rv.Name}, &storagev1alpha1.ReplicatedVolume{}); err == nil {
			what = append(what, "the ReplicatedVolume")
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		for _, n := range s.Nodes {
			recs, err := n.Publications()
			if err != nil {
				return err
			}
			if len(recs) > 0 {
				what = append(what, fmt.Sprintf("publications on %s: %+v", n.Name, recs))
			}
		}
		if len(what) > 0 {
			return fmt.Errorf("left: %v", what)
		}
		return nil
	})
}

// resolveEndpoints plays cluster DNS and the Service proxy: each endpoint's
// host, the replica Service's DNS name, becomes the address of that
// Service's EndpointSlice; the TLS server name stays the Service's.
func resolveEndpoints(t *testing.T, ctx context.Context, ns string, vctx map[string]string) map[string]string {
	t.Helper()
	var eps []api.Endpoint
	if err := json.Unmarshal([]byte(vctx[replicated.ContextEndpoints]), &eps); err != nil {
		t.Fatalf("volume context endpoints %q: %v", vctx[replicated.ContextEndpoints], err)
	}
	for i, ep := range eps {
		host, port, err := net.SplitHostPort(ep.Address)
		if err != nil {
			t.Fatal(err)
		}
		service, _, _ := strings.Cut(host, ".")
		slice := &discoveryv1.EndpointSlice{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: service}, slice); err != nil {
			t.Fatalf("EndpointSlice of Service %s: %v", service, err)
		}
		if len(slice.Endpoints) != 1 || len(slice.Endpoints[0].Addresses) != 1 || len(slice.Ports) != 1 ||
			strconv.Itoa(int(*slice.Ports[0].Port)) != port {
			t.Fatalf("EndpointSlice %s: %+v %+v, want one address on port %s", service, slice.Endpoints, slice.Ports, port)
		}
		eps[i].Address = net.JoinHostPort(slice.Endpoints[0].Addresses[0], port)
		if eps[i].ServerName == "" {
			eps[i].ServerName = host
		}
	}
	raw, _ := json.Marshal(eps)
	out := map[string]string{}
	for k, v := range vctx {
		out[k] = v
	}
	out[replicated.ContextEndpoints] = string(raw)
	return out
}
