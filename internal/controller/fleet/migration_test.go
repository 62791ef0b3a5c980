package fleet_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// v005Fleet is what v0.0.5 left behind (docs/fleet-operator.md, "Migration from
// v0.0.5 and the 0023 controller"): an OnDelete StatefulSet with the given
// podManagementPolicy whose Pods, every one from its template, its launcher
// held by a scheduling gate; member f-0 released and Ready; member f-1 stopped
// by the launcher and held on a Pod newer than its claim; member f-2 retired by
// the launcher: its Pod, newer than its claim, still exists and crash-loops on
// the startup-denial marker that names its UID (the marker names one Pod so
// that it outlasts container restarts while a new Pod may reuse the disk; under
// OnDelete nothing replaced that Pod), its claim kept; and the reservation
// annotation with legacy fields. It returns the claims' UIDs, the retired Pod's
// UID and the reservation.
func (fx *fixture) v005Fleet(policy appsv1.PodManagementPolicyType) (map[string]string, types.UID, *celldv1alpha1.CelldStorageReservation) {
	fx.t.Helper()
	f := persistentFleet(fx.ns, 3)
	noPlacement(f)
	f = fx.create(f)
	old := legacyStatefulSet(fx, f, policy)
	fx.must(env.Client.Create(fx.ctx, old))
	for _, m := range []string{"f-0", "f-1", "f-2"} {
		fx.kube.launcherReleases[m] = true
	}
	fx.kube.until("v0.0.5 ran three Ready members", func() bool { return fx.readyMembers() == 3 })
	claims := map[string]string{}
	var newest time.Time
	for n, c := range fx.claims() {
		claims[n] = string(c.UID)
		if c.CreationTimestamp.After(newest) {
			newest = c.CreationTimestamp.Time
		}
	}
	if len(claims) != 3 {
		fx.t.Fatalf("test setup: v0.0.5 must leave three claims; got %v", claims)
	}
	// v0.0.5 ran for a while: f-2's Pod is newer than its claim.
	wallClockPast(fx.t, newest, time.Second)
	first := fx.pods()["f-2"].UID
	fx.must(env.Client.Delete(fx.ctx, fx.pods()["f-2"]))
	fx.kube.until("f-2 back in a newer Pod", func() bool {
		p, ok := fx.pods()["f-2"]
		return ok && p.UID != first && isReady(p)
	})
	// The launcher retires f-2 in that Pod.
	retired := fx.pods()["f-2"].UID
	fx.kube.denied[retired] = true
	fx.kube.until("f-2 retired: its celld refused in its Pod", func() bool {
		p, ok := fx.pods()["f-2"]
		return ok && p.UID == retired && !isReady(p)
	})
	// The launcher stops f-1 and holds its next Pod, which is newer than its
	// claim (so not "a disk created for its current Pod").
	delete(fx.kube.launcherReleases, "f-1")
	fx.must(env.Client.Delete(fx.ctx, fx.pods()["f-1"]))
	fx.kube.until("f-1 held by the launcher's gate", func() bool {
		p, ok := fx.pods()["f-1"]
		return ok && !isTerminating(p) && len(p.Spec.SchedulingGates) == 1
	})
	res := &celldv1alpha1.CelldStorageReservation{ObjectMeta: metav1.ObjectMeta{Name: "bucket-" + fx.ns,
		Annotations: map[string]string{celldv1alpha1.AnnotationReservationState: `{"claims":{"data-f-0":"x"},"strictOperations":["op"],"lastDisruption":"2026-01-01T00:00:00Z","appliedCount":3}`}},
		Spec: celldv1alpha1.CelldStorageReservationSpec{Bucket: "bucket-" + fx.ns,
			Fleet: celldv1alpha1.FleetReference{Namespace: fx.ns, Name: fleetName, UID: string(f.UID)}}}
	fx.must(env.Client.Create(fx.ctx, res))
	// v0.0.5 ran for a while: f-1 has been held and f-2 refused far longer
	// than the replacement delay, and f-0 Ready as long.
	fx.advance(2 * testDelay)
	return claims, retired, res
}

// TestMigrationFromV005RollsOutAndRetiredMemberRejoinsOnItsDisk proves the
// migration (docs/fleet-operator.md, "Migration from v0.0.5 and the 0023
// controller") for both podManagementPolicies an adopted StatefulSet may have:
// the fleet is rolled onto RollingUpdate and the current template (the gated
// Pod and the retired one included), ends Parallel, the retired member comes
// back in a new Pod and rejoins on its old claim, nothing is replaced (no Pod
// or claim delete by the operator; an OrderedReady set is recreated with its
// Pods orphaned), and the legacy reservation fields are dropped on the first
// write.
func TestMigrationFromV005RollsOutAndRetiredMemberRejoinsOnItsDisk(t *testing.T) {
	for _, policy := range []appsv1.PodManagementPolicyType{appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement} {
		t.Run(string(policy), func(t *testing.T) {
			fx := newFixture(t)
			claims, retired, res := fx.v005Fleet(policy)
			fx.reconcile()
			fx.must(env.Client.Get(fx.ctx, client.ObjectKeyFromObject(res), res))
			if v, ok := res.Annotations[celldv1alpha1.AnnotationReservationState]; ok {
				t.Fatalf("the first write must drop the legacy reservation fields (no capacity history: no annotation); got %s", v)
			}
			fx.converge("the adopted fleet rolled onto the current template with 3 members", fx.settled(3))
			s := fx.sts()
			if s.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
				t.Fatalf("the adopted StatefulSet must end RollingUpdate and Parallel; got %s and %s", s.Spec.UpdateStrategy.Type, s.Spec.PodManagementPolicy)
			}
			for _, p := range fx.pods() {
				if len(p.Spec.SchedulingGates) != 0 || p.Spec.Containers[0].Image != image {
					t.Fatalf("every earlier Pod, gated or not, must be replaced on the current template; %s is not", p.Name)
				}
			}
			if p := fx.pods()["f-2"]; p.UID == retired || !isReady(p) {
				t.Fatalf("the retired member must be back, Ready, in a new Pod (retired Pod %s, now %s)", retired, p.UID)
			}
			for n, uid := range claims {
				fx.requireDiskKept(n, uid) // data-f-2: the retired member rejoins on its old disk
			}
			fx.requireNoMemberDeletes("the migration from v0.0.5")
			if fx.evts.has(replaced) {
				t.Fatal("the migration must replace no member")
			}
			sets := fx.rec.deletesOf("StatefulSet")
			switch policy {
			case appsv1.OrderedReadyPodManagement:
				if len(sets) != 1 || !sets[0].orphan || !sets[0].preconditions || !sets[0].resourceVer {
					t.Fatalf("an OrderedReady StatefulSet must be recreated once, deleted with propagation Orphan and UID and resourceVersion preconditions; got %+v", sets)
				}
			default:
				if len(sets) != 0 {
					t.Fatalf("a Parallel StatefulSet must be kept; got deletes %+v", sets)
				}
			}
		})
	}
}

// TestGatedMemberIsWaitingNotDown proves a member Pod held by a scheduling
// gate (the v0.0.5 launcher's) is not a member that cannot come back: it
// waits on configuration, so its disk is never due for replacement however
// long it is held, while every other member is Ready.
func TestGatedMemberIsWaitingNotDown(t *testing.T) {
	fx := newFixture(t)
	fx.restartedOnOldDisks(3)
	fx.kube.gated["f-1"] = true
	fx.must(env.Client.Delete(fx.ctx, fx.pods()["f-1"]))
	fx.kube.until("f-1 held by a scheduling gate", func() bool {
		p, ok := fx.pods()["f-1"]
		return ok && !isTerminating(p) && len(p.Spec.SchedulingGates) == 1
	})
	fx.reconcile()
	fx.advance(testDelay + 6*time.Minute)
	fx.reconcile()
	fx.kube.step(fx.ctx)
	fx.reconcile()
	fx.requireNoMemberDeletes("a member held by a scheduling gate")
	if fx.evts.has(replaced) {
		t.Fatal("a member held by a scheduling gate must not be replaced")
	}
}

// legacyStatefulSet is what v0.0.5 created: OnDelete, the given
// podManagementPolicy, an older image, the launcher's scheduling gate, claims
// with the fleet UID label.
func legacyStatefulSet(fx *fixture, f *celldv1alpha1.CelldFleet, policy appsv1.PodManagementPolicyType) *appsv1.StatefulSet {
	labels := map[string]string{celldv1alpha1.LabelFleet: f.Name}
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: f.Name, Namespace: fx.ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(3)), ServiceName: f.Name + "-peers", PodManagementPolicy: policy,
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				// The v0.0.5 launcher held its Pods until it released them.
				SchedulingGates: []corev1.PodSchedulingGate{{Name: celldv1alpha1.SchedulingGateLauncher}},
				Containers: []corev1.Container{{Name: "celld", Image: newImage,
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/work"}}}},
			}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{
					celldv1alpha1.LabelFleet: f.Name, celldv1alpha1.LabelFleetUID: string(f.UID)}},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceGi}}},
			}},
		},
	}
	if err := controllerutil.SetControllerReference(f, s, env.Scheme); err != nil {
		fx.t.Fatal(err)
	}
	return s
}

// readyMembers counts the Ready Pods in the namespace.
func (fx *fixture) readyMembers() int {
	n := 0
	for _, p := range fx.pods() {
		if isReady(p) {
			n++
		}
	}
	return n
}
