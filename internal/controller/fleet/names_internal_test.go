package fleet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func TestOrdinalOfAcceptsOnlyMemberNames(t *testing.T) {
	f := &celldv1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "f"}}
	for _, tc := range []struct {
		name string
		want int32
		ok   bool
	}{
		{"f-0", 0, true}, {"f-12", 12, true}, {"f-01", 0, false}, {"f--1", 0, false},
		{"f-peers", 0, false}, {"g-1", 0, false}, {"f-", 0, false}, {"f-1-2", 0, false},
	} {
		got, ok := ordinalOf(f, tc.name)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ordinalOf(%q) = %d, %t; want %d, %t", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestNormalizedStateKeepsOnlyCapacityHistory(t *testing.T) {
	withCapacity := &celldv1alpha1.CelldFleet{Spec: celldv1alpha1.CelldFleetSpec{Capacity: &celldv1alpha1.Capacity{Mode: celldv1alpha1.CapacityShadow}}}
	without := &celldv1alpha1.CelldFleet{}
	history := `{"capacity":[{"id":"a","from":1,"to":2,"at":"2026-01-01T00:00:00Z"}]}`
	for _, tc := range []struct {
		name    string
		f       *celldv1alpha1.CelldFleet
		current string
		want    string
	}{
		{"earlier release fields dropped", withCapacity, `{"capacity":[{"id":"a","from":1,"to":2,"at":"2026-01-01T00:00:00Z"}],"claims":{"x":"y"},"appliedCount":3}`, history},
		{"history kept as is", withCapacity, history, history},
		{"no capacity policy: removed", without, history, ""},
		{"only earlier release fields: removed", withCapacity, `{"claims":{"x":"y"}}`, ""},
		{"unreadable: removed", withCapacity, `not json`, ""},
	} {
		if got := normalizedState(tc.f, tc.current); got != tc.want {
			t.Errorf("%s: normalizedState = %q; want %q", tc.name, got, tc.want)
		}
	}
}

func TestFillDeclaredServiceFieldsFillsOnlyMissingDeclaredFields(t *testing.T) {
	f := &celldv1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "n"}}
	want := renderServices(f)[1]
	older := want.DeepCopy()
	older.Spec.Ports[0].AppProtocol = nil
	delete(older.Labels, labelManagedBy)
	changedPort := want.DeepCopy()
	changedPort.Spec.Ports[0].Port = 9999
	otherProtocol := want.DeepCopy()
	otherProtocol.Spec.Ports[0].AppProtocol = ptr.To("grpc")
	notHeadless := want.DeepCopy()
	notHeadless.Spec.ClusterIP = "10.0.0.1"
	older.Spec.InternalTrafficPolicy = nil
	affinity := want.DeepCopy()
	affinity.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	internalLocal := want.DeepCopy()
	internalLocal.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	externalLocal := want.DeepCopy()
	externalLocal.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	notPublishing := want.DeepCopy()
	notPublishing.Spec.PublishNotReadyAddresses = false
	otherSelector := want.DeepCopy()
	otherSelector.Spec.Selector = map[string]string{"app": "other"}
	nodePort := want.DeepCopy()
	nodePort.Spec.Type = corev1.ServiceTypeNodePort
	otherLabel := want.DeepCopy()
	otherLabel.Labels[labelManagedBy] = "someone"
	for _, tc := range []struct {
		name     string
		got      *corev1.Service
		wantDiff bool
	}{
		{"exact match", want.DeepCopy(), false},
		{"older release: missing appProtocol, internalTrafficPolicy and label", older, false},
		{"session affinity", affinity, true},
		{"internal traffic policy", internalLocal, true},
		{"external traffic policy", externalLocal, true},
		{"publishNotReadyAddresses", notPublishing, true},
		{"selector", otherSelector, true},
		{"type", nodePort, true},
		{"operator label", otherLabel, true},
		{"changed port", changedPort, true},
		{"different appProtocol", otherProtocol, true},
		{"not headless", notHeadless, true},
	} {
		filled, diff := fillDeclaredServiceFields(tc.got, want)
		if (diff != "") != tc.wantDiff {
			t.Errorf("%s: diff %q; want a difference: %t", tc.name, diff, tc.wantDiff)
			continue
		}
		if diff == "" && (filled.Spec.Ports[0].AppProtocol == nil || filled.Labels[labelManagedBy] == "" || filled.Spec.InternalTrafficPolicy == nil) {
			t.Errorf("%s: declared fields must be filled; got %+v", tc.name, filled)
		}
	}
}
