package fleet_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func (fx *fixture) sts() *appsv1.StatefulSet {
	fx.t.Helper()
	s := &appsv1.StatefulSet{}
	if err := fx.get(fleetName, s); err != nil {
		fx.t.Fatalf("read StatefulSet: %v", err)
	}
	return s
}

func (fx *fixture) pods() map[string]*corev1.Pod {
	fx.t.Helper()
	var list corev1.PodList
	if err := env.Client.List(fx.ctx, &list, client.InNamespace(fx.ns)); err != nil {
		fx.t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

func (fx *fixture) claims() map[string]*corev1.PersistentVolumeClaim {
	fx.t.Helper()
	var list corev1.PersistentVolumeClaimList
	if err := env.Client.List(fx.ctx, &list, client.InNamespace(fx.ns)); err != nil {
		fx.t.Fatal(err)
	}
	out := map[string]*corev1.PersistentVolumeClaim{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// claimUIDs are the UIDs of the live claims, by name.
func (fx *fixture) claimUIDs() map[string]types.UID {
	out := map[string]types.UID{}
	for n, c := range fx.claims() {
		if c.DeletionTimestamp == nil {
			out[n] = c.UID
		}
	}
	return out
}

// settled says the StatefulSet has n replicas, all Ready on its template.
func (fx *fixture) settled(n int32) func() bool {
	return func() bool {
		s := &appsv1.StatefulSet{}
		if err := fx.get(fleetName, s); err != nil || s.Spec.Replicas == nil || *s.Spec.Replicas != n {
			return false
		}
		rev := revisionOf(s.Spec.Template)
		ready := int32(0)
		for _, p := range fx.pods() {
			if isReady(p) && p.Labels[revisionLabel] == rev {
				ready++
			}
		}
		return ready == n && int(n) == len(fx.pods())
	}
}

// runningFleet creates a PersistentFleet of n members and converges it.
func (fx *fixture) runningFleet(n int32, edit ...func(*celldv1alpha1.CelldFleet)) {
	fx.t.Helper()
	f := persistentFleet(fx.ns, n)
	for _, e := range edit {
		e(f)
	}
	fx.create(f)
	fx.converge(fmt.Sprintf("%d Ready members", n), fx.settled(n))
	fx.reconcile() // the operator sees the settled fleet (and marks served disks)
}

// advance moves the fake clock forward.
func (fx *fixture) advance(d time.Duration) { fx.clock.Step(d) }

var resourceGi = resource.MustParse("1Gi")

func reqFor(ns, name string) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

func findCondition(f *celldv1alpha1.CelldFleet, t celldv1alpha1.ConditionType) metav1.Condition {
	for _, c := range f.Status.Conditions {
		if c.Type == string(t) {
			return c
		}
	}
	return metav1.Condition{}
}

// storageClassImmediate is a StorageClass that provisions before scheduling.
type storageClassImmediate struct{ name string }

func (s *storageClassImmediate) create(fx *fixture) {
	s.name = "immediate-" + fx.ns
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: s.name}, Provisioner: "ebs.csi.aws.com",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}
	if err := env.Client.Create(fx.ctx, sc); err != nil {
		fx.t.Fatal(err)
	}
}

func yamlRoundTrip(doc map[string]any) ([]byte, error) { return json.Marshal(doc) }

func mustUnmarshal(t *testing.T, b []byte, into any) {
	t.Helper()
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
}
