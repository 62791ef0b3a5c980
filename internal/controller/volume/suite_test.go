package volume_test

// The volume controller against a real kube-apiserver and etcd. envtest runs
// no kubelet, scheduler or replica host, so a test plays them with API
// objects only: Nodes and NODE DaemonSet Pods whose replica-host container
// is ready, the hosts' Leases (hostRenewed), and (hostSim) the replica
// hosts' writes to VolumeReplica status and their backing-use finalizer. Each test uses its own storage and
// manager namespaces and removes its Nodes, so eligibility counts only its
// own.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
	"github.com/cellfleet/cellfleet/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const backingClass = "local-backing"

var counter atomic.Int32

type fixture struct {
	t             *testing.T
	ctx           context.Context
	ns, managerNS string
	prefix        string // node name prefix of this test
	rec           *recordingClient
	r             *volume.Reconciler
	// opts are the manager's flags the next restart uses (namespaces and
	// the API reader are the fixture's).
	opts volume.Options
	// holdProtection keeps kubernetes.io/pvc-protection on deleted claims,
	// as a kube-controller-manager that has not got to them yet would.
	holdProtection bool
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	n := counter.Add(1)
	fx := &fixture{t: t, ctx: ctx, ns: fmt.Sprintf("vs%d", n), managerNS: fmt.Sprintf("vm%d", n), prefix: fmt.Sprintf("t%d-", n)}
	for _, ns := range []string{fx.ns, fx.managerNS} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		nodes := &corev1.NodeList{}
		_ = env.Client.List(context.Background(), nodes)
		for i := range nodes.Items {
			if len(nodes.Items[i].Name) > len(fx.prefix) && nodes.Items[i].Name[:len(fx.prefix)] == fx.prefix {
				_ = env.Client.Delete(context.Background(), &nodes.Items[i])
			}
		}
	})
	fx.rec = &recordingClient{Client: env.Client}
	fx.restart()
	return fx
}

// restart replaces the controller with a fresh one, as a new manager
// process would be: nothing carries over but the cluster.
func (fx *fixture) restart() {
	fx.t.Helper()
	opts := fx.opts
	opts.Namespace, opts.ManagerNamespace, opts.APIReader = fx.ns, fx.managerNS, env.Client
	r, err := volume.New(fx.rec, env.Scheme, opts)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.r = r
}

// node creates a Node labelled for local storage (zone optional) and, when
// hostReady, a Running NODE Pod on it whose replica-host container is ready.
func (fx *fixture) node(name, zone string, hostReady bool) string {
	fx.t.Helper()
	name = fx.prefix + name
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{volume.LocalStorageLabel: name}}}
	if zone != "" {
		n.Labels[volume.ZoneLabel] = zone
	}
	if err := env.Client.Create(fx.ctx, n); err != nil {
		fx.t.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "node-" + name, Namespace: fx.ns,
			Labels: map[string]string{volume.NodeComponentLabel: volume.NodeComponentValue}},
		Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{
			{Name: "csi-node", Image: "csi-node"}, {Name: volume.ReplicaHostContainer, Image: "replica-host"}}},
	}
	if err := env.Client.Create(fx.ctx, p); err != nil {
		fx.t.Fatal(err)
	}
	fx.setHostReady(name, hostReady)
	if hostReady {
		fx.hostRenewed(name, time.Now(), time.Hour)
	}
	return name
}

// hostRenewed plays node's replica host renewing its Lease at renewed
// (internal/replica/kubehost/lease.go writes the same fields); a duration
// of an hour keeps it alive for the whole test.
func (fx *fixture) hostRenewed(node string, renewed time.Time, duration time.Duration) {
	fx.t.Helper()
	name := storagev1alpha1.HostLeaseName(node)
	l := &coordinationv1.Lease{}
	err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: name}, l)
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: fx.ns, Name: name,
			Labels: map[string]string{storagev1alpha1.LabelNode: node}}}
	} else if err != nil {
		fx.t.Fatal(err)
	}
	secs, at := int32(duration/time.Second), metav1.NewMicroTime(renewed)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &node, &secs, &at
	if l.ResourceVersion == "" {
		err = env.Client.Create(fx.ctx, l)
	} else {
		err = env.Client.Update(fx.ctx, l)
	}
	if err != nil {
		fx.t.Fatal(err)
	}
}

func (fx *fixture) setHostReady(node string, ready bool) {
	fx.t.Helper()
	p := &corev1.Pod{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: "node-" + node}, p); err != nil {
		fx.t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "csi-node", Ready: true}, {Name: volume.ReplicaHostContainer, Ready: ready}}
	if err := env.Client.Status().Update(fx.ctx, p); err != nil {
		fx.t.Fatal(err)
	}
}

func newVolume(name string, replicas int32) *storagev1alpha1.ReplicatedVolume {
	return &storagev1alpha1.ReplicatedVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1alpha1.ReplicatedVolumeSpec{
			AccessMode: storagev1alpha1.AccessReadWriteOnce, Replicas: replicas,
			Capacity: resource.MustParse("1Gi"), BackingStorageClassName: backingClass,
			Source: storagev1alpha1.ClaimReference{Namespace: "app", Name: "data"},
		},
	}
}

// volume creates a ReplicatedVolume with a name unique to the test.
func (fx *fixture) volume(replicas int32) *storagev1alpha1.ReplicatedVolume {
	fx.t.Helper()
	rv := newVolume(fmt.Sprintf("v%d", counter.Add(1)), replicas)
	if err := env.Client.Create(fx.ctx, rv); err != nil {
		fx.t.Fatal(err)
	}
	return rv
}

func (fx *fixture) reconcile(name string) (ctrl.Result, error) {
	return fx.r.Reconcile(fx.ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
}

// converge reconciles until a reconcile makes no write (the controller's
// fixed point) and fails the test if it never gets there. Before each
// reconcile it plays the PVC protection controller, unless holdProtection.
func (fx *fixture) converge(name string) {
	fx.t.Helper()
	for round := 0; round < 20; round++ {
		if !fx.holdProtection {
			if err := testenv.LiftPVCProtection(fx.ctx, env.Client, fx.ns); err != nil {
				fx.t.Fatal(err)
			}
		}
		before := len(fx.rec.recorded())
		if _, err := fx.reconcile(name); err != nil {
			fx.t.Logf("reconcile %d of %s: %v", round, name, err)
			continue
		}
		if len(fx.rec.recorded()) == before {
			return
		}
	}
	fx.t.Fatalf("volume %s did not converge in 20 reconciles", name)
}

func (fx *fixture) get(name string) *storagev1alpha1.ReplicatedVolume {
	fx.t.Helper()
	rv := &storagev1alpha1.ReplicatedVolume{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Name: name}, rv); err != nil {
		fx.t.Fatal(err)
	}
	return rv
}

func (fx *fixture) replicas(volumeName string) []storagev1alpha1.VolumeReplica {
	fx.t.Helper()
	l := &storagev1alpha1.VolumeReplicaList{}
	if err := env.Client.List(fx.ctx, l, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: volumeName}); err != nil {
		fx.t.Fatal(err)
	}
	return l.Items
}

func (fx *fixture) claims(volumeName string) []corev1.PersistentVolumeClaim {
	fx.t.Helper()
	l := &corev1.PersistentVolumeClaimList{}
	if err := env.Client.List(fx.ctx, l, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: volumeName}); err != nil {
		fx.t.Fatal(err)
	}
	return l.Items
}

func (fx *fixture) services(volumeName string) []corev1.Service {
	fx.t.Helper()
	l := &corev1.ServiceList{}
	if err := env.Client.List(fx.ctx, l, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: volumeName}); err != nil {
		fx.t.Fatal(err)
	}
	return l.Items
}

func (fx *fixture) secret(ns, name string) (*corev1.Secret, bool) {
	fx.t.Helper()
	s := &corev1.Secret{}
	err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		fx.t.Fatal(err)
	}
	return s, true
}

func condition(rv *storagev1alpha1.ReplicatedVolume, t storagev1alpha1.ConditionType) *metav1.Condition {
	return meta.FindStatusCondition(rv.Status.Conditions, t.String())
}

// hostReport plays replica i's host writing its worker's status.
func (fx *fixture) hostReport(vr *storagev1alpha1.VolumeReplica, role storagev1alpha1.ReplicaRole, ready, lost bool, lag int64) {
	fx.t.Helper()
	cur := &storagev1alpha1.VolumeReplica{}
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(vr), cur); err != nil {
		fx.t.Fatal(err)
	}
	cur.Status.Role, cur.Status.Lag, cur.Status.AppliedIndex = role, lag, 100-lag
	st := func(b bool) metav1.ConditionStatus {
		if b {
			return metav1.ConditionTrue
		}
		return metav1.ConditionFalse
	}
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: storagev1alpha1.ReplicaReady.String(), Status: st(ready), Reason: "WorkerRunning"})
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: storagev1alpha1.ReplicaStateLost.String(), Status: st(lost), Reason: "StateIntact"})
	if err := env.Client.Status().Update(fx.ctx, cur); err != nil {
		fx.t.Fatal(err)
	}
}

// write is one API write the controller issued.
type write struct {
	op, kind, name string
	uid            string // a Delete's UID precondition, "" when it had none
}

func (w write) String() string { return w.op + " " + w.kind + "/" + w.name }

var errInjected = errors.New("injected fault: connection reset")

// recordingClient records every write of the controller and can refuse one
// (inject returns true) as a lost connection would.
type recordingClient struct {
	client.Client
	mu     sync.Mutex
	writes []write
	inject func(w write) bool
	// before runs before a write reaches the API server (another writer
	// changing the object in between makes a real conflict).
	before func(w write)
}

func (r *recordingClient) do(w write, call func() error) error {
	r.mu.Lock()
	r.writes = append(r.writes, w)
	inject, before := r.inject, r.before
	r.mu.Unlock()
	if before != nil {
		before(w)
	}
	if inject != nil && inject(w) {
		return fmt.Errorf("%s: %w", w, errInjected)
	}
	return call()
}

func (r *recordingClient) recorded() []write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]write(nil), r.writes...)
}

func (r *recordingClient) kind(obj client.Object) string {
	gvk, err := r.Client.GroupVersionKindFor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return gvk.Kind
}

func (r *recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return r.do(write{op: "create", kind: r.kind(obj), name: obj.GetName()}, func() error { return r.Client.Create(ctx, obj, opts...) })
}

func (r *recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return r.do(write{op: "update", kind: r.kind(obj), name: obj.GetName()}, func() error { return r.Client.Update(ctx, obj, opts...) })
}

func (r *recordingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	return r.do(write{op: "patch", kind: r.kind(obj), name: obj.GetName()}, func() error { return r.Client.Patch(ctx, obj, p, opts...) })
}

func (r *recordingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	do := &client.DeleteOptions{}
	do.ApplyOptions(opts)
	w := write{op: "delete", kind: r.kind(obj), name: obj.GetName()}
	if do.Preconditions != nil && do.Preconditions.UID != nil {
		w.uid = string(*do.Preconditions.UID)
	}
	return r.do(w, func() error { return r.Client.Delete(ctx, obj, opts...) })
}

func (r *recordingClient) Status() client.SubResourceWriter {
	return &recordingStatus{SubResourceWriter: r.Client.Status(), r: r}
}

type recordingStatus struct {
	client.SubResourceWriter
	r *recordingClient
}

func (s *recordingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.r.do(write{op: "status", kind: s.r.kind(obj), name: obj.GetName()}, func() error { return s.SubResourceWriter.Update(ctx, obj, opts...) })
}
