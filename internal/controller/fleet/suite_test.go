package fleet_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/fleet"
	"github.com/cellfleet/cellfleet/internal/testenv"
)

// env is the package's real kube-apiserver and etcd.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const (
	image      = "registry.example.com/celld/celld@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	newImage   = "registry.example.com/celld/celld@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	className  = "zonal-ssd"
	fleetName  = "f"
	testDelay  = 10 * time.Minute
	maxRounds  = 60
	waitBudget = 30 * time.Second
)

var nsCounter atomic.Int32

// fixture is one test's namespace, fleet, simulated cluster, fake clock and
// operator.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	ns    string
	clock *clocktesting.FakeClock
	kube  *kubeSim
	rec   *recordingClient
	op    *fleet.Reconciler
	evts  *eventLog
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns := fmt.Sprintf("t%d", nsCounter.Add(1))
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	ensureStorageClass(t, ctx)
	fx := &fixture{t: t, ctx: ctx, ns: ns, clock: clocktesting.NewFakeClock(time.Now())}
	fx.kube = newKubeSim(t, env.Client, ns, fx.clock)
	fx.rec = &recordingClient{Client: env.Client}
	fx.restartOperator()
	return fx
}

// restartOperator replaces the operator with a fresh one, as a new process
// would be after a restart: nothing carries over but the cluster.
func (fx *fixture) restartOperator() {
	fx.t.Helper()
	fx.evts = &eventLog{}
	op, err := fleet.New(fx.rec, env.Scheme, fleet.Options{
		MemberReplacementDelay: testDelay, Clock: fx.clock, APIReader: env.Client, Recorder: fx.evts,
	})
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.op = op
}

func ensureStorageClass(t *testing.T, ctx context.Context) {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: className},
		Provisioner:       "ebs.csi.aws.com",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if err := env.Client.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// persistentFleet is a valid PersistentFleet of n members.
func persistentFleet(ns string, n int32) *celldv1alpha1.CelldFleet {
	return &celldv1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: fleetName, Namespace: ns},
		Spec: celldv1alpha1.CelldFleetSpec{
			Profile:      celldv1alpha1.ProfilePersistentFleet,
			Replicas:     n,
			RuntimeImage: image,
			Storage: celldv1alpha1.Storage{
				Bucket: "bucket-" + ns, StorageClassName: ptr.To(className), SizeGiB: ptr.To(int32(10)),
			},
			Placement: &celldv1alpha1.Placement{Zones: []string{"za", "zb", "zc"}, AZCount: 3},
		},
	}
}

func bucketFleet(ns string, n int32, workload celldv1alpha1.BucketWorkload) *celldv1alpha1.CelldFleet {
	return &celldv1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: fleetName, Namespace: ns},
		Spec: celldv1alpha1.CelldFleetSpec{
			Profile: celldv1alpha1.ProfileBucket, BucketWorkload: workload, Replicas: n, RuntimeImage: image,
			Storage:   celldv1alpha1.Storage{Bucket: "bucket-" + ns},
			Placement: &celldv1alpha1.Placement{Zones: []string{"za", "zb", "zc"}, AZCount: 3},
		},
	}
}

func (fx *fixture) create(f *celldv1alpha1.CelldFleet) *celldv1alpha1.CelldFleet {
	fx.t.Helper()
	if err := env.Client.Create(fx.ctx, f); err != nil {
		fx.t.Fatalf("create fleet: %v", err)
	}
	return f
}

func (fx *fixture) key() types.NamespacedName {
	return types.NamespacedName{Namespace: fx.ns, Name: fleetName}
}

// reconcile runs the operator once and fails the test on an error.
func (fx *fixture) reconcile() ctrl.Result {
	fx.t.Helper()
	res, err := fx.op.Reconcile(fx.ctx, ctrl.Request{NamespacedName: fx.key()})
	if err != nil {
		fx.t.Fatalf("reconcile: %v", err)
	}
	return res
}

// tryReconcile runs the operator once and returns its error.
func (fx *fixture) tryReconcile() error {
	_, err := fx.op.Reconcile(fx.ctx, ctrl.Request{NamespacedName: fx.key()})
	return err
}

// converge alternates operator reconciles and simulated-cluster steps until
// done holds, failing the test with what after maxRounds.
func (fx *fixture) converge(what string, done func() bool) {
	fx.t.Helper()
	for range maxRounds {
		fx.reconcile()
		fx.kube.step(fx.ctx)
		if done() {
			return
		}
	}
	fx.t.Fatalf("the fleet never reached: %s", what)
}

func (fx *fixture) fleet() *celldv1alpha1.CelldFleet {
	fx.t.Helper()
	f := &celldv1alpha1.CelldFleet{}
	if err := env.Client.Get(fx.ctx, fx.key(), f); err != nil {
		fx.t.Fatalf("read fleet: %v", err)
	}
	return f
}

// edit changes the fleet's spec, retrying conflicts.
func (fx *fixture) edit(change func(*celldv1alpha1.CelldFleet)) {
	fx.t.Helper()
	for range 10 {
		f := fx.fleet()
		change(f)
		err := env.Client.Update(fx.ctx, f)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			fx.t.Fatalf("edit fleet: %v", err)
		}
	}
	fx.t.Fatal("edit fleet: conflicts never stopped")
}

func (fx *fixture) condition(t celldv1alpha1.ConditionType) metav1.Condition {
	fx.t.Helper()
	for _, c := range fx.fleet().Status.Conditions {
		if c.Type == string(t) {
			return c
		}
	}
	fx.t.Fatalf("fleet has no %s condition", t)
	return metav1.Condition{}
}

// requireBlocked fails unless Blocked is True with reason, and its message
// contains each of parts.
func (fx *fixture) requireBlocked(reason celldv1alpha1.ConditionReason, parts ...string) {
	fx.t.Helper()
	c := fx.condition(celldv1alpha1.ConditionBlocked)
	if c.Status != metav1.ConditionTrue || c.Reason != string(reason) {
		fx.t.Fatalf("the fleet must report Blocked=True with reason %s; got %s/%s: %s", reason, c.Status, c.Reason, c.Message)
	}
	for _, p := range parts {
		if !strings.Contains(c.Message, p) {
			fx.t.Fatalf("the Blocked message must name %q; got %q", p, c.Message)
		}
	}
}

func (fx *fixture) requireNotBlocked() {
	fx.t.Helper()
	if c := fx.condition(celldv1alpha1.ConditionBlocked); c.Status != metav1.ConditionFalse {
		fx.t.Fatalf("the fleet must not be Blocked; got %s: %s", c.Reason, c.Message)
	}
}

func (fx *fixture) get(name string, obj client.Object) error {
	return env.Client.Get(fx.ctx, types.NamespacedName{Namespace: fx.ns, Name: name}, obj)
}
