package volume

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

func servingReplica(name string, role storagev1alpha1.ReplicaRole, capacity string) *storagev1alpha1.VolumeReplica {
	vr := &storagev1alpha1.VolumeReplica{ObjectMeta: metav1.ObjectMeta{Name: name}}
	vr.Status.Role = role
	vr.Status.Conditions = []metav1.Condition{{Type: storagev1alpha1.ReplicaReady.String(), Status: metav1.ConditionTrue}}
	if capacity != "" {
		q := resource.MustParse(capacity)
		vr.Status.Capacity = &q
	}
	return vr
}

// The volume serves the smallest capacity a ready member reports; Resizing
// says which step the growth waits for.
func TestServedCapacityAndResizingFollowTheReplicas(t *testing.T) {
	rv := &storagev1alpha1.ReplicatedVolume{Spec: storagev1alpha1.ReplicatedVolumeSpec{Capacity: resource.MustParse("2Gi")}}
	down := servingReplica("v-r2", storagev1alpha1.RoleStopped, "1Gi")
	down.Status.Conditions[0].Status = metav1.ConditionFalse
	for _, tc := range []struct {
		name   string
		set    replicaSet
		short  []string
		served string
		status metav1.ConditionStatus
		reason storagev1alpha1.ConditionReason
	}{
		{"nothing reported", replicaSet{servingReplica("v-r0", storagev1alpha1.RoleCoordinator, "")}, nil, "",
			metav1.ConditionFalse, storagev1alpha1.ReasonProvisioning},
		{"claims growing", replicaSet{servingReplica("v-r0", storagev1alpha1.RoleCoordinator, "1Gi")}, []string{"v-r0"}, "1Gi",
			metav1.ConditionTrue, storagev1alpha1.ReasonClaimsGrowing},
		{"a follower behind", replicaSet{servingReplica("v-r0", storagev1alpha1.RoleCoordinator, "2Gi"),
			servingReplica("v-r1", storagev1alpha1.RoleFollower, "1Gi")}, nil, "1Gi", metav1.ConditionTrue, storagev1alpha1.ReasonCapacityCommitting},
		{"served; a stopped replica's old report does not count", replicaSet{servingReplica("v-r0", storagev1alpha1.RoleCoordinator, "2Gi"),
			servingReplica("v-r1", storagev1alpha1.RoleFollower, "2Gi"), down}, nil, "2Gi", metav1.ConditionFalse, storagev1alpha1.ReasonCapacityServed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			served := servedCapacity(tc.set, deriveHealth(len(tc.set), tc.set))
			switch {
			case tc.served == "" && served != nil, tc.served != "" && (served == nil || served.Cmp(resource.MustParse(tc.served)) != 0):
				t.Fatalf("served %v, want %q", served, tc.served)
			}
			status, reason, msg := resizing(rv, served, tc.short)
			if status != tc.status || reason != tc.reason {
				t.Fatalf("Resizing %s %s (%s), want %s %s", status, reason, msg, tc.status, tc.reason)
			}
		})
	}
}
