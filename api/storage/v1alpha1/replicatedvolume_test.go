package v1alpha1_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

func validVolume(name string) *storagev1alpha1.ReplicatedVolume {
	return &storagev1alpha1.ReplicatedVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: storagev1alpha1.GroupVersion.String(), Kind: "ReplicatedVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1alpha1.ReplicatedVolumeSpec{
			AccessMode:              storagev1alpha1.AccessReadWriteOnce,
			Replicas:                3,
			Capacity:                resource.MustParse("1Gi"),
			BackingStorageClassName: "local-storage",
			Source:                  storagev1alpha1.ClaimReference{Namespace: "data", Name: "db"},
		},
	}
}

// asUnstructured converts obj so a case can write values the typed struct
// cannot express (explicit zero, wrong types, absent required fields).
func asUnstructured(t *testing.T, obj runtime.Object, edit func(map[string]any)) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatalf("convert to unstructured: %v", err)
	}
	edit(m)
	return &unstructured.Unstructured{Object: m}
}

func spec(m map[string]any) map[string]any { return m["spec"].(map[string]any) }

func TestReplicatedVolumeCreateValidation(t *testing.T) {
	cases := []struct {
		name    string
		objName string
		mutate  func(*storagev1alpha1.ReplicatedVolume)
		raw     func(map[string]any)
		wantErr []string // empty: accepted
	}{
		{name: "complete volume accepted"},
		{name: "one replica accepted", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.Replicas = 1 }},
		{name: "five replicas accepted", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.Replicas = 5 }},
		{name: "zero replicas rejected", raw: func(m map[string]any) { spec(m)["replicas"] = int64(0) },
			wantErr: []string{"spec.replicas", "should be greater than or equal to 1"}},
		{name: "six replicas rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.Replicas = 6 },
			wantErr: []string{"spec.replicas", "should be less than or equal to 5"}},
		{name: "ReadWriteMany accepted", mutate: func(v *storagev1alpha1.ReplicatedVolume) {
			v.Spec.AccessMode = storagev1alpha1.AccessReadWriteMany
		}},
		{name: "unknown access mode rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.AccessMode = "WriteSometimes" },
			wantErr: []string{"spec.accessMode", "Unsupported value", "ReadWriteOnce"}},
		{name: "missing access mode rejected", raw: func(m map[string]any) { delete(spec(m), "accessMode") },
			wantErr: []string{"spec.accessMode", "Required value"}},
		{name: "one KiB capacity accepted", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.Capacity = resource.MustParse("1Ki") }},
		{name: "zero capacity rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.Capacity = resource.MustParse("0") },
			wantErr: []string{"spec.capacity must be greater than zero"}},
		{name: "negative capacity rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.Capacity = resource.MustParse("-1Gi") },
			wantErr: []string{"spec.capacity must be greater than zero"}},
		{name: "missing capacity rejected", raw: func(m map[string]any) { delete(spec(m), "capacity") },
			wantErr: []string{"spec.capacity", "Required value"}},
		{name: "empty backing class rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.BackingStorageClassName = "" },
			wantErr: []string{"spec.backingStorageClassName", "at least 1 chars long"}},
		{name: "backing class that is not a DNS subdomain rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) {
			v.Spec.BackingStorageClassName = "Local_Storage"
		}, wantErr: []string{"spec.backingStorageClassName", "should match"}},
		{name: "dotted backing class accepted", mutate: func(v *storagev1alpha1.ReplicatedVolume) {
			v.Spec.BackingStorageClassName = "local.storage.eric.dev"
		}},
		{name: "source without name rejected", raw: func(m map[string]any) { delete(spec(m)["source"].(map[string]any), "name") },
			wantErr: []string{"spec.source.name", "Required value"}},
		{name: "source without namespace rejected", raw: func(m map[string]any) { delete(spec(m)["source"].(map[string]any), "namespace") },
			wantErr: []string{"spec.source.namespace", "Required value"}},
		{name: "source namespace with upper case rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.Source.Namespace = "Data" },
			wantErr: []string{"spec.source.namespace", "should match"}},
		{name: "source namespace longer than a DNS label rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) {
			v.Spec.Source.Namespace = strings.Repeat("n", 64)
		}, wantErr: []string{"spec.source.namespace", "may not be more than 63"}},
		{name: "name of 60 characters accepted", objName: "v" + strings.Repeat("a", 59)},
		{name: "name of 61 characters rejected", objName: "v" + strings.Repeat("a", 60),
			wantErr: []string{"metadata.name must be at most 60 characters"}},
		{name: "name starting with a digit rejected", objName: "0volume",
			wantErr: []string{"metadata.name must be a DNS-1035 label"}},
		{name: "dotted name rejected", objName: "vol.one",
			wantErr: []string{"metadata.name must be a DNS-1035 label"}},
	}
	ctx := testContext(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.objName
			if name == "" {
				name = uniqueName("rv")
			}
			v := validVolume(name)
			if tc.mutate != nil {
				tc.mutate(v)
			}
			var obj client.Object = v
			if tc.raw != nil {
				obj = asUnstructured(t, v, tc.raw)
			}
			err := env.Client.Create(ctx, obj)
			if err == nil {
				cleanupObject(t, obj)
			}
			expectVerdict(t, "ReplicatedVolume "+tc.name, err, tc.wantErr)
		})
	}
}

func TestReplicatedVolumeSpecIsImmutable(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*storagev1alpha1.ReplicatedVolume)
		wantErr []string
	}{
		{name: "access mode change rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) {
			v.Spec.AccessMode = storagev1alpha1.AccessReadWriteMany
		}, wantErr: []string{"spec.accessMode is immutable"}},
		{name: "replica count change rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.Replicas = 5 },
			wantErr: []string{"spec.replicas is immutable"}},
		{name: "capacity growth accepted", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.Capacity = resource.MustParse("2Gi") }},
		{name: "capacity shrink rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.Capacity = resource.MustParse("512Mi") },
			wantErr: []string{"spec.capacity may grow but never shrink"}},
		{name: "same capacity in other units accepted", mutate: func(v *storagev1alpha1.ReplicatedVolume) {
			v.Spec.Capacity = resource.MustParse("1024Mi")
		}},
		{name: "backing class change rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.BackingStorageClassName = "other" },
			wantErr: []string{"spec.backingStorageClassName is immutable"}},
		{name: "source change rejected", mutate: func(v *storagev1alpha1.ReplicatedVolume) { v.Spec.Source.Name = "other" },
			wantErr: []string{"spec.source is immutable"}},
		{name: "label change accepted", mutate: func(v *storagev1alpha1.ReplicatedVolume) {
			v.Labels = map[string]string{"team": "storage"}
		}},
	}
	ctx := testContext(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := validVolume(uniqueName("rv"))
			if err := env.Client.Create(ctx, v); err != nil {
				t.Fatalf("create the volume to update: %v", err)
			}
			cleanupObject(t, v)
			tc.mutate(v)
			expectVerdict(t, "an update where "+tc.name, env.Client.Update(ctx, v), tc.wantErr)
		})
	}
}

func TestReplicatedVolumeDefaultsToThreeReplicas(t *testing.T) {
	ctx := testContext(t)
	v := validVolume(uniqueName("rv"))
	v.Spec.Replicas = 0 // omitted on the wire
	if err := env.Client.Create(ctx, v); err != nil {
		t.Fatalf("create a volume without replicas: %v", err)
	}
	cleanupObject(t, v)
	var got storagev1alpha1.ReplicatedVolume
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(v), &got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Spec.Replicas != storagev1alpha1.DefaultReplicas {
		t.Fatalf("a volume created without spec.replicas must get %d replicas, got %d",
			storagev1alpha1.DefaultReplicas, got.Spec.Replicas)
	}
}

func TestReplicatedVolumeStatusValidation(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		name    string
		status  storagev1alpha1.ReplicatedVolumeStatus
		wantErr []string
	}{
		{name: "degraded status with a coordinator and replicas accepted", status: storagev1alpha1.ReplicatedVolumeStatus{
			ObservedGeneration: 1, Robustness: storagev1alpha1.RobustnessDegraded, Coordinator: "vol-r0",
			Replicas: []storagev1alpha1.ReplicaSummary{
				{Name: "vol-r0", Node: "n1", Role: storagev1alpha1.RoleCoordinator, AppliedIndex: 10, Ready: true},
				{Name: "vol-r1", Node: "n2", Role: storagev1alpha1.RoleStopped, StateLost: true},
			},
			Conditions: []metav1.Condition{{
				Type: storagev1alpha1.VolumeDegraded.String(), Status: metav1.ConditionTrue,
				Reason: storagev1alpha1.ReasonReplicaLost.String(), Message: "vol-r1 lost its journal", LastTransitionTime: now,
			}},
		}},
		{name: "unknown robustness rejected", status: storagev1alpha1.ReplicatedVolumeStatus{Robustness: "Fine"},
			wantErr: []string{"status.robustness", "Unsupported value", "Healthy"}},
		{name: "unknown replica role rejected", status: storagev1alpha1.ReplicatedVolumeStatus{
			Replicas: []storagev1alpha1.ReplicaSummary{{Name: "vol-r0", Role: "Leader"}}},
			wantErr: []string{"status.replicas[0].role", "Unsupported value"}},
		// Five replicas and the one replacement in progress fit; seven do not.
		{name: "seven replica summaries rejected", status: storagev1alpha1.ReplicatedVolumeStatus{
			Replicas: []storagev1alpha1.ReplicaSummary{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}, {Name: "e"}, {Name: "f"}, {Name: "g"}}},
			wantErr: []string{"status.replicas", "must have at most 6 items"}},
		{name: "duplicate replica summary rejected", status: storagev1alpha1.ReplicatedVolumeStatus{
			Replicas: []storagev1alpha1.ReplicaSummary{{Name: "a"}, {Name: "a"}}},
			wantErr: []string{"status.replicas[1]", "Duplicate value"}},
		{name: "negative lag rejected", status: storagev1alpha1.ReplicatedVolumeStatus{
			Replicas: []storagev1alpha1.ReplicaSummary{{Name: "a", Lag: -1}}},
			wantErr: []string{"status.replicas[0].lag", "should be greater than or equal to 0"}},
	}
	ctx := testContext(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := validVolume(uniqueName("rv"))
			if err := env.Client.Create(ctx, v); err != nil {
				t.Fatalf("create the volume: %v", err)
			}
			cleanupObject(t, v)
			v.Status = tc.status
			expectVerdict(t, "a status where "+tc.name, env.Client.Status().Update(ctx, v), tc.wantErr)
		})
	}
}
