package kubehost_test

// Volume growth end to end on real parts: ControllerExpandVolume of the
// replicated CSI controller, the real volume controller, three real
// replica-host processes on envtest's API server, and a real client of the
// volume. The fixture plays the local provisioner and publication as in
// lifecycle_test.go.

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	csicontroller "github.com/cellfleet/cellfleet/internal/csi/replicated/controller"
	replicaclient "github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

const (
	grownFrom = 64 << 20 // fx.volume's capacity
	grownTo   = 192 << 20
)

// backingClass makes the backing StorageClass the CSI controller checks:
// it must allow expansion.
func (fx *fixture) backingClass() {
	fx.t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-backing"}, Provisioner: "local.storage.eric.dev",
		AllowVolumeExpansion: ptr.To(true), VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
	if err := env.Client.Create(fx.ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		fx.t.Fatal(err)
	}
}

// volumeClient connects to the volume the way a mount does: the replicas'
// Pod IPs and ports, their Service names as TLS server names, the mount
// Secret's CA and token.
func (fx *fixture) volumeClient(name string) *replicaclient.Client {
	fx.t.Helper()
	sec := &corev1.Secret{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: name + "-mount"}, sec); err != nil {
		fx.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data[storagev1alpha1.SecretKeyCACert]) {
		fx.t.Fatal("mount Secret holds no CA certificate")
	}
	var eps []replicaclient.Endpoint
	for _, vr := range fx.replicas(name) {
		for _, n := range fx.Nodes {
			if n.Name == vr.Spec.Node {
				eps = append(eps, replicaclient.Endpoint{ID: vr.Name, Address: net.JoinHostPort(n.PodIP, strconv.Itoa(int(vr.Spec.Port))),
					ServerName: vr.Name + "." + fx.ns + ".svc"})
			}
		}
	}
	ctx, cancel := context.WithTimeout(fx.ctx, 30*time.Second)
	defer cancel()
	cl, err := replicaclient.Dial(ctx, replicaclient.Config{Volume: name, Endpoints: eps, RootCAs: pool,
		Token: string(sec.Data[storagev1alpha1.SecretKeyMountToken]), AttemptTimeout: 2 * time.Second, RetryBudget: 20 * time.Second})
	if err != nil {
		fx.t.Fatalf("connect to volume %s: %v", name, err)
	}
	fx.t.Cleanup(func() { cl.Close() })
	return cl
}

func (fx *fixture) waitReady(name string) {
	fx.t.Helper()
	poll.Until(fx.t, 2*time.Minute, "volume "+name+" Ready and Healthy", func() error {
		cur := &storagev1alpha1.ReplicatedVolume{}
		if err := env.Client.Get(fx.ctx, client.ObjectKey{Name: name}, cur); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, storagev1alpha1.VolumeReady.String())
		if c == nil || c.Status != metav1.ConditionTrue || cur.Status.Robustness != storagev1alpha1.RobustnessHealthy {
			return fmt.Errorf("robustness %q, Ready %+v", cur.Status.Robustness, c)
		}
		return nil
	})
}

func growRecord(k int) []byte { return []byte(fmt.Sprintf("grow-%08d\n", k)) }

// ControllerExpandVolume → backing claims grown (and recorded, for the local
// driver) → VolumeReplica spec.capacity → the coordinator commits it →
// every replica reports it, the volume's status says so, and StatFs through
// the volume shows it; a shrink is refused everywhere; writes running
// through the growth all survive.
func TestVolumeGrowsThroughRaftWhileWritten(t *testing.T) {
	fx := newFixture(t)
	for i := range hosts {
		fx.AddNode(fmt.Sprintf("kh-grow-%c", 'a'+i))
	}
	fx.backingClass()
	fx.StartControllerOnFreePorts()
	fx.StartHosts()
	rv := fx.volume("khgrow", hosts)
	fx.ProvisionClaims(rv.Name, hosts)
	fx.waitReady(rv.Name)

	cl := fx.volumeClient(rv.Name)
	if st, err := cl.StatFs(fx.ctx); err != nil || st.Capacity != grownFrom {
		t.Fatalf("statfs before growth: %+v %v, want capacity %d", st, err, grownFrom)
	}
	f, err := cl.Create(fx.ctx, replicaclient.RootIno, "data", 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(fx.ctx)
	var written atomic.Int64
	done := make(chan error, 1)
	go func() {
		for k := 0; ctx.Err() == nil; k++ {
			if _, _, err := cl.Append(fx.ctx, f.Ino, growRecord(k)); err != nil {
				done <- fmt.Errorf("append of record %d was not acknowledged: %w", k, err)
				return
			}
			written.Store(int64(k + 1))
		}
		done <- nil
	}()

	csiCtl, err := csicontroller.New(csicontroller.Options{Client: env.Client, Reader: env.Client, ReplicaNamespace: fx.ns})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := csiCtl.ControllerExpandVolume(fx.ctx, &csi.ControllerExpandVolumeRequest{VolumeId: rv.Name,
		CapacityRange: &csi.CapacityRange{RequiredBytes: grownTo}})
	if err != nil || resp.CapacityBytes != grownTo || !resp.NodeExpansionRequired {
		t.Fatalf("ControllerExpandVolume: %+v %v", resp, err)
	}
	want := resource.NewQuantity(grownTo, resource.BinarySI)
	poll.Until(t, 2*time.Minute, "claims, PVs and replicas hold the grown capacity", func() error {
		for _, vr := range fx.replicas(rv.Name) {
			c := &corev1.PersistentVolumeClaim{}
			if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Spec.BackingClaimName}, c); err != nil {
				return err
			}
			req, got := c.Spec.Resources.Requests[corev1.ResourceStorage], c.Status.Capacity[corev1.ResourceStorage]
			if req.Cmp(*want) != 0 || got.Cmp(*want) != 0 {
				return fmt.Errorf("claim %s requests %s and holds %s", c.Name, req.String(), got.String())
			}
			pv := &corev1.PersistentVolume{}
			if err := env.Client.Get(fx.ctx, client.ObjectKey{Name: c.Spec.VolumeName}, pv); err != nil {
				return err
			}
			if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(*want) != 0 {
				return fmt.Errorf("PV %s holds %s", pv.Name, got.String())
			}
			if vr.Spec.Capacity == nil || vr.Spec.Capacity.Cmp(*want) != 0 {
				return fmt.Errorf("replica %s asked for %v", vr.Name, vr.Spec.Capacity)
			}
			if vr.Status.Capacity == nil || vr.Status.Capacity.Cmp(*want) != 0 {
				return fmt.Errorf("replica %s serves %v", vr.Name, vr.Status.Capacity)
			}
		}
		cur := &storagev1alpha1.ReplicatedVolume{}
		if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(rv), cur); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, storagev1alpha1.VolumeResizing.String())
		if cur.Status.Capacity == nil || cur.Status.Capacity.Cmp(*want) != 0 || c == nil || c.Status != metav1.ConditionFalse ||
			c.Reason != storagev1alpha1.ReasonCapacityServed.String() {
			return fmt.Errorf("volume serves %v, Resizing %+v", cur.Status.Capacity, c)
		}
		return nil
	})
	if st, err := cl.StatFs(fx.ctx); err != nil || st.Capacity != grownTo {
		t.Fatalf("statfs after growth: %+v %v, want capacity %d", st, err, grownTo)
	}

	// Shrinking is refused: by the CSI controller (it answers the current
	// capacity), and by the API on both objects.
	resp, err = csiCtl.ControllerExpandVolume(fx.ctx, &csi.ControllerExpandVolumeRequest{VolumeId: rv.Name,
		CapacityRange: &csi.CapacityRange{RequiredBytes: grownFrom}})
	if err != nil || resp.CapacityBytes != grownTo {
		t.Fatalf("ControllerExpandVolume to a smaller size: %+v %v, want the current %d", resp, err, grownTo)
	}
	// Merge patches without a resourceVersion: the hosts and the controller
	// write the statuses all the time, so an update would only conflict.
	vr := fx.replicas(rv.Name)[0]
	vrBase := vr.DeepCopy()
	vr.Spec.Capacity = resource.NewQuantity(grownFrom, resource.BinarySI)
	if err := env.Client.Patch(fx.ctx, &vr, client.MergeFrom(vrBase)); !apierrors.IsInvalid(err) {
		t.Fatalf("shrinking VolumeReplica %s's spec.capacity: %v, want Invalid", vr.Name, err)
	}
	cur := &storagev1alpha1.ReplicatedVolume{}
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(rv), cur); err != nil {
		t.Fatal(err)
	}
	curBase := cur.DeepCopy()
	cur.Spec.Capacity = resource.MustParse("64Mi")
	if err := env.Client.Patch(fx.ctx, cur, client.MergeFrom(curBase)); !apierrors.IsInvalid(err) {
		t.Fatalf("shrinking the volume's spec.capacity: %v, want Invalid", err)
	}
	if st, err := cl.StatFs(fx.ctx); err != nil || st.Capacity != grownTo {
		t.Fatalf("statfs after the refused shrink: %+v %v, want capacity %d", st, err, grownTo)
	}

	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	n := int(written.Load())
	var wantData bytes.Buffer
	for k := range n {
		wantData.Write(growRecord(k))
	}
	var got []byte
	for {
		b, err := cl.Read(fx.ctx, f.Ino, uint64(len(got)), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			break
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, wantData.Bytes()) {
		t.Fatalf("file holds %d bytes, want the %d records written through the growth (%d bytes)", len(got), n, wantData.Len())
	}
	t.Logf("%d records written through the growth from %d to %d bytes", n, grownFrom, grownTo)
}
