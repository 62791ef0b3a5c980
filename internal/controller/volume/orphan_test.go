package volume_test

// Orphaned volumes against a real API server: a volume whose source claim
// is gone (or is another claim of the same name) and that no
// PersistentVolume holds is collected after the grace period, through the
// ordered teardown; one a PV holds is never collected.

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

const orphanGrace = 2 * time.Second

// newOrphanFixture is a fixture whose controller has a short orphan grace
// period, with three eligible nodes.
func newOrphanFixture(t *testing.T) *fixture {
	fx := newFixture(t)
	fx.opts.OrphanGracePeriod = orphanGrace
	fx.restart()
	for _, n := range []string{"a", "b", "c"} {
		fx.node(n, "", true)
	}
	return fx
}

// volumeFor creates a three-replica volume whose source claim is
// fx.ns/claim (which may or may not exist).
func (fx *fixture) volumeFor(claim string) *storagev1alpha1.ReplicatedVolume {
	fx.t.Helper()
	rv := newVolume(fmt.Sprintf("v%d", counter.Add(1)), 3)
	rv.Spec.Source = storagev1alpha1.ClaimReference{Namespace: fx.ns, Name: claim}
	if err := env.Client.Create(fx.ctx, rv); err != nil {
		fx.t.Fatal(err)
	}
	return rv
}

// sourceClaim creates the application's claim name in fx.ns.
func (fx *fixture) sourceClaim(name string) *corev1.PersistentVolumeClaim {
	fx.t.Helper()
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: fx.ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := env.Client.Create(fx.ctx, c); err != nil {
		fx.t.Fatal(err)
	}
	return c
}

// deleteClaim deletes c for good: envtest runs no PVC protection controller
// to lift kubernetes.io/pvc-protection.
func (fx *fixture) deleteClaim(c *corev1.PersistentVolumeClaim) {
	fx.t.Helper()
	if err := env.Client.Delete(fx.ctx, c); err != nil {
		fx.t.Fatal(err)
	}
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(c), c); err == nil {
		c.Finalizers = nil
		if err := env.Client.Update(fx.ctx, c); err != nil && !apierrors.IsNotFound(err) {
			fx.t.Fatal(err)
		}
	}
}

// gone: the volume and every object of it are removed (claims at least
// being deleted), and every delete the controller made carried a UID.
func (fx *fixture) collected(rv *storagev1alpha1.ReplicatedVolume) {
	fx.t.Helper()
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(rv), &storagev1alpha1.ReplicatedVolume{}); !apierrors.IsNotFound(err) {
		fx.t.Fatalf("orphaned volume %s not collected: get = %v", rv.Name, err)
	}
	if n := len(fx.replicas(rv.Name)); n != 0 {
		fx.t.Errorf("%d VolumeReplicas left", n)
	}
	for _, c := range fx.claims(rv.Name) {
		if c.DeletionTimestamp == nil {
			fx.t.Errorf("backing claim %s left", c.Name)
		}
	}
	if n := len(fx.services(rv.Name)); n != 0 {
		fx.t.Errorf("%d replica Services left", n)
	}
	if _, ok := fx.secret(fx.managerNS, "rv-"+rv.Name+"-ca"); ok {
		fx.t.Errorf("CA secret of %s left", rv.Name)
	}
	for _, w := range fx.rec.recorded() {
		if w.op == "delete" && w.uid == "" {
			fx.t.Errorf("delete without UID precondition: %v", w)
		}
	}
}

func (fx *fixture) annotation(rv *storagev1alpha1.ReplicatedVolume, key string) (string, bool) {
	v, ok := fx.get(rv.Name).Annotations[key]
	return v, ok
}

// The provisioner gave up (the claim was deleted while CreateVolume waited)
// and no PV was ever made: after the grace period the volume goes, with its
// replicas, claims, Services and Secrets, across a manager restart.
func TestOrphanedVolumeIsCollectedAfterTheGrace(t *testing.T) {
	fx := newOrphanFixture(t)
	rv := fx.volumeFor("data")
	fx.converge(rv.Name)
	if _, ok := fx.annotation(rv, storagev1alpha1.AnnotationOrphanedSince); !ok {
		t.Fatalf("volume %s without its source claim carries no %s", rv.Name, storagev1alpha1.AnnotationOrphanedSince)
	}
	if n := len(fx.replicas(rv.Name)); n != 3 {
		t.Fatalf("%d replicas during the grace period, want 3 (nothing is collected before it ends)", n)
	}
	time.Sleep(orphanGrace + time.Second)
	fx.restart() // the grace counts from the annotation, not from this process
	fx.converge(rv.Name)
	fx.collected(rv)
}

// A PersistentVolume holding the volume (a Retain PV whose claim is gone)
// keeps it, whatever the grace period.
func TestVolumeHeldByAPersistentVolumeIsNeverCollected(t *testing.T) {
	fx := newOrphanFixture(t)
	rv := fx.volumeFor("retained")
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + rv.Name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "replicated.storage.eric.dev", VolumeHandle: rv.Name}},
		}}
	if err := env.Client.Create(fx.ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(fx.ctx, pv) })
	fx.converge(rv.Name)
	time.Sleep(orphanGrace + time.Second)
	fx.converge(rv.Name)
	if _, ok := fx.annotation(rv, storagev1alpha1.AnnotationOrphanedSince); ok {
		t.Errorf("volume %s held by PV %s recorded as orphaned", rv.Name, pv.Name)
	}
	if got := fx.get(rv.Name); got.DeletionTimestamp != nil {
		t.Fatalf("volume %s held by PV %s was deleted", rv.Name, pv.Name)
	}
	fx.noDuplicates(rv.Name, 3)
}

// The source claim's UID is recorded at first sight; a claim recreated with
// the same name is another claim, and the volume is collected. While the
// original claim exists nothing is.
func TestVolumeWhoseClaimWasRecreatedIsCollected(t *testing.T) {
	fx := newOrphanFixture(t)
	first := fx.sourceClaim("data")
	rv := fx.volumeFor("data")
	fx.converge(rv.Name)
	if uid, _ := fx.annotation(rv, storagev1alpha1.AnnotationSourceClaimUID); uid != string(first.UID) {
		t.Fatalf("%s = %q, want the source claim's uid %s", storagev1alpha1.AnnotationSourceClaimUID, uid, first.UID)
	}
	time.Sleep(orphanGrace + time.Second)
	fx.converge(rv.Name)
	if _, ok := fx.annotation(rv, storagev1alpha1.AnnotationOrphanedSince); ok {
		t.Fatalf("volume %s with its source claim recorded as orphaned", rv.Name)
	}

	fx.deleteClaim(first)
	second := fx.sourceClaim("data")
	fx.converge(rv.Name)
	if _, ok := fx.annotation(rv, storagev1alpha1.AnnotationOrphanedSince); !ok {
		t.Fatalf("volume %s made for claim uid %s not recorded as orphaned once the claim is %s", rv.Name, first.UID, second.UID)
	}
	time.Sleep(orphanGrace + time.Second)
	fx.converge(rv.Name)
	fx.collected(rv)
}
