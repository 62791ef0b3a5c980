package main

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Each type is watched only where a Role grants it: fleet types in the
// fleet namespaces, VolumeReplicas in the storage namespace, the kinds both
// controllers use in both. A watch outside its Role never syncs.
func TestCacheWatchesEachTypeWhereItsRoleIsBound(t *testing.T) {
	o, err := parseFlags([]string{"--fleet-namespaces=celld", "--storage-namespace=st"})
	if err != nil {
		t.Fatal(err)
	}
	c := cacheOptions(o)
	if _, ok := c.DefaultNamespaces["st"]; ok || len(c.DefaultNamespaces) != 1 {
		t.Errorf("default namespaces %v, want the fleet namespace only (the fleet Role is bound nowhere else)", keysOf(c.DefaultNamespaces))
	}
	want := map[string][]string{"VolumeReplica": {"st"}, "Lease": {"st"}, "Pod": {"celld", "st"}, "PersistentVolumeClaim": {"celld", "st"}, "Service": {"celld", "st"}}
	for obj, by := range c.ByObject {
		var kind string
		switch obj.(type) {
		case *storagev1alpha1.VolumeReplica:
			kind = "VolumeReplica"
		case *coordinationv1.Lease:
			kind = "Lease"
			if by.Label == nil || !by.Label.Matches(labels.Set{storagev1alpha1.LabelNode: "n"}) || by.Label.Matches(labels.Set{}) {
				t.Errorf("Leases cached by %v, want only the replica hosts' (labelled %s)", by.Label, storagev1alpha1.LabelNode)
			}
		case *corev1.Pod:
			kind = "Pod"
		case *corev1.PersistentVolumeClaim:
			kind = "PersistentVolumeClaim"
		case *corev1.Service:
			kind = "Service"
		}
		got := keysOf(by.Namespaces)
		if len(got) != len(want[kind]) {
			t.Errorf("%s watched in %v, want %v", kind, got, want[kind])
		}
		for _, ns := range want[kind] {
			if _, ok := by.Namespaces[ns]; !ok {
				t.Errorf("%s not watched in %s", kind, ns)
			}
		}
		delete(want, kind)
	}
	if len(want) > 0 {
		t.Errorf("no cache restriction for %v", want)
	}
}

func keysOf(m map[string]cache.Config) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
