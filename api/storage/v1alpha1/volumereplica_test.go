package v1alpha1_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

func validReplica(name string) *storagev1alpha1.VolumeReplica {
	return &storagev1alpha1.VolumeReplica{
		TypeMeta:   metav1.TypeMeta{APIVersion: storagev1alpha1.GroupVersion.String(), Kind: "VolumeReplica"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: driverNamespace},
		Spec: storagev1alpha1.VolumeReplicaSpec{
			VolumeName:       "vol",
			Node:             "worker-1",
			Port:             20001,
			BackingClaimName: name,
			Generation:       1,
			Peers: []storagev1alpha1.ReplicaPeer{
				{Name: "vol-r1", Address: "vol-r1.cellfleet-system.svc", Port: 20001},
				{Name: "vol-r2", Address: "vol-r2.cellfleet-system.svc", Port: 20002},
			},
		},
	}
}

func peers(n int) []storagev1alpha1.ReplicaPeer {
	out := make([]storagev1alpha1.ReplicaPeer, n)
	for i := range out {
		out[i] = storagev1alpha1.ReplicaPeer{Name: "p" + strings.Repeat("x", i+1), Address: "peer.svc", Port: 2000}
	}
	return out
}

func TestVolumeReplicaCreateValidation(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*storagev1alpha1.VolumeReplica)
		raw     func(map[string]any)
		wantErr []string
	}{
		{name: "complete replica accepted"},
		{name: "replica without peers accepted", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Peers = nil }},
		{name: "port 1024 accepted", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Port = 1024 }},
		{name: "port 65535 accepted", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Port = 65535 }},
		{name: "privileged port 1023 rejected", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Port = 1023 },
			wantErr: []string{"spec.port", "should be greater than or equal to 1024"}},
		{name: "port 65536 rejected", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Port = 65536 },
			wantErr: []string{"spec.port", "should be less than or equal to 65535"}},
		{name: "missing port rejected", raw: func(m map[string]any) { delete(spec(m), "port") },
			wantErr: []string{"spec.port", "Required value"}},
		{name: "missing node rejected", raw: func(m map[string]any) { delete(spec(m), "node") },
			wantErr: []string{"spec.node", "Required value"}},
		{name: "node that is not a DNS subdomain rejected", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Node = "Worker_1" },
			wantErr: []string{"spec.node", "should match"}},
		{name: "missing volume rejected", raw: func(m map[string]any) { delete(spec(m), "volumeName") },
			wantErr: []string{"spec.volumeName", "Required value"}},
		{name: "volume name longer than 60 rejected", mutate: func(r *storagev1alpha1.VolumeReplica) {
			r.Spec.VolumeName = "v" + strings.Repeat("a", 60)
		}, wantErr: []string{"spec.volumeName", "may not be more than 60"}},
		{name: "missing backing claim rejected", raw: func(m map[string]any) { delete(spec(m), "backingClaimName") },
			wantErr: []string{"spec.backingClaimName", "Required value"}},
		{name: "backing claim with upper case rejected", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.BackingClaimName = "Claim" },
			wantErr: []string{"spec.backingClaimName", "should match"}},
		{name: "generation zero rejected", raw: func(m map[string]any) { spec(m)["generation"] = int64(0) },
			wantErr: []string{"spec.generation", "should be greater than or equal to 1"}},
		{name: "four peers accepted", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Peers = peers(4) }},
		// A replacement of a five-replica volume lists five peers (four
		// survivors and the replica it replaces); six are refused.
		{name: "six peers rejected", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Peers = peers(6) },
			wantErr: []string{"spec.peers", "must have at most 5 items"}},
		{name: "peer listing the replica itself rejected", mutate: func(r *storagev1alpha1.VolumeReplica) {
			r.Spec.Peers = append(r.Spec.Peers, storagev1alpha1.ReplicaPeer{Name: r.Name, Address: "self.svc", Port: 2000})
		}, wantErr: []string{"spec.peers must not list the replica itself"}},
		{name: "duplicate peer rejected", mutate: func(r *storagev1alpha1.VolumeReplica) {
			r.Spec.Peers = append(r.Spec.Peers, r.Spec.Peers[0])
		}, wantErr: []string{"spec.peers[2]", "Duplicate value"}},
		{name: "peer on a privileged port rejected", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Peers[0].Port = 80 },
			wantErr: []string{"spec.peers[0].port", "should be greater than or equal to 1024"}},
		{name: "peer address with a path rejected", mutate: func(r *storagev1alpha1.VolumeReplica) {
			r.Spec.Peers[0].Address = "vol-r1.svc/evil"
		}, wantErr: []string{"spec.peers[0].address", "should match"}},
	}
	ctx := testContext(t)
	ensureNamespace(t, ctx)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := validReplica(uniqueName("vol-r"))
			if tc.mutate != nil {
				tc.mutate(r)
			}
			var obj client.Object = r
			if tc.raw != nil {
				obj = asUnstructured(t, r, tc.raw)
			}
			err := env.Client.Create(ctx, obj)
			if err == nil {
				cleanupObject(t, obj)
			}
			expectVerdict(t, "VolumeReplica "+tc.name, err, tc.wantErr)
		})
	}
}

func TestVolumeReplicaIdentityIsImmutable(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*storagev1alpha1.VolumeReplica)
		wantErr []string
	}{
		{name: "volume change rejected", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.VolumeName = "other" },
			wantErr: []string{"spec.volumeName is immutable"}},
		{name: "node change rejected", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Node = "worker-2" },
			wantErr: []string{"spec.node is immutable"}},
		{name: "port change rejected", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Port = 20002 },
			wantErr: []string{"spec.port is immutable"}},
		{name: "backing claim change rejected", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.BackingClaimName = "other" },
			wantErr: []string{"spec.backingClaimName is immutable"}},
		{name: "generation decrease rejected", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Generation = 1 },
			wantErr: []string{"spec.generation must not decrease"}},
		{name: "generation increase accepted", mutate: func(r *storagev1alpha1.VolumeReplica) { r.Spec.Generation = 3 }},
		{name: "membership change of peers accepted", mutate: func(r *storagev1alpha1.VolumeReplica) {
			r.Spec.Peers = r.Spec.Peers[:1]
		}},
	}
	ctx := testContext(t)
	ensureNamespace(t, ctx)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := validReplica(uniqueName("vol-r"))
			r.Spec.Generation = 2
			if err := env.Client.Create(ctx, r); err != nil {
				t.Fatalf("create the replica to update: %v", err)
			}
			cleanupObject(t, r)
			tc.mutate(r)
			expectVerdict(t, "an update where "+tc.name, env.Client.Update(ctx, r), tc.wantErr)
		})
	}
}

func TestVolumeReplicaDefaultsToGenerationOne(t *testing.T) {
	ctx := testContext(t)
	ensureNamespace(t, ctx)
	r := validReplica(uniqueName("vol-r"))
	r.Spec.Generation = 0 // omitted on the wire
	if err := env.Client.Create(ctx, r); err != nil {
		t.Fatalf("create a replica without generation: %v", err)
	}
	cleanupObject(t, r)
	var got storagev1alpha1.VolumeReplica
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), &got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Spec.Generation != 1 {
		t.Fatalf("a replica created without spec.generation must start at generation 1, got %d", got.Spec.Generation)
	}
}

func TestVolumeReplicaStatusValidation(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		name    string
		status  storagev1alpha1.VolumeReplicaStatus
		wantErr []string
	}{
		{name: "lost replica state accepted", status: storagev1alpha1.VolumeReplicaStatus{
			ObservedGeneration: 1, Role: storagev1alpha1.RoleStopped,
			Conditions: []metav1.Condition{{
				Type: storagev1alpha1.ReplicaStateLost.String(), Status: metav1.ConditionTrue,
				Reason:  storagev1alpha1.ReasonJournalTruncated.String(),
				Message: "journal ends at 12, identity records 40; application-data extent unknown", LastTransitionTime: now,
			}},
		}},
		{name: "follower with applied index and lag accepted", status: storagev1alpha1.VolumeReplicaStatus{
			Role: storagev1alpha1.RoleFollower, AppliedIndex: 100, Lag: 3}},
		{name: "unknown role rejected", status: storagev1alpha1.VolumeReplicaStatus{Role: "Leader"},
			wantErr: []string{"status.role", "Unsupported value", "Coordinator"}},
		{name: "negative applied index rejected", status: storagev1alpha1.VolumeReplicaStatus{AppliedIndex: -1},
			wantErr: []string{"status.appliedIndex", "should be greater than or equal to 0"}},
		{name: "negative lag rejected", status: storagev1alpha1.VolumeReplicaStatus{Lag: -1},
			wantErr: []string{"status.lag", "should be greater than or equal to 0"}},
	}
	ctx := testContext(t)
	ensureNamespace(t, ctx)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := validReplica(uniqueName("vol-r"))
			if err := env.Client.Create(ctx, r); err != nil {
				t.Fatalf("create the replica: %v", err)
			}
			cleanupObject(t, r)
			r.Status = tc.status
			expectVerdict(t, "a status where "+tc.name, env.Client.Status().Update(ctx, r), tc.wantErr)
		})
	}
}

// `kubectl get volumereplicas` prints LAG and APPLIED from
// status.lag and status.appliedIndex; a replica that is current (lag 0) must
// show 0, not a blank cell, so the stored object carries both fields even
// at 0.
func TestVolumeReplicaStatusKeepsZeroLagAndAppliedIndex(t *testing.T) {
	ctx := testContext(t)
	ensureNamespace(t, ctx)
	r := validReplica(uniqueName("vol-r"))
	if err := env.Client.Create(ctx, r); err != nil {
		t.Fatalf("create the replica: %v", err)
	}
	cleanupObject(t, r)
	r.Status = storagev1alpha1.VolumeReplicaStatus{Role: storagev1alpha1.RoleCoordinator, Lag: 0, AppliedIndex: 0}
	if err := env.Client.Status().Update(ctx, r); err != nil {
		t.Fatalf("write the status: %v", err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(storagev1alpha1.GroupVersion.WithKind("VolumeReplica"))
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), u); err != nil {
		t.Fatalf("get: %v", err)
	}
	for _, field := range []string{"lag", "appliedIndex"} {
		v, found, err := unstructured.NestedFieldNoCopy(u.Object, "status", field)
		if err != nil || !found {
			t.Errorf("stored status has no %s (err %v): %v", field, err, u.Object["status"])
			continue
		}
		if n, ok := v.(int64); !ok || n != 0 {
			t.Errorf("stored status.%s = %#v, want 0", field, v)
		}
	}
}
