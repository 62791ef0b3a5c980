package main

import (
	"slices"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Each half watches only where its own Roles are bound: the fleet operator
// the fleet namespaces, the storage controllers the storage namespace (and,
// of its Leases, only the replica hosts'). A watch outside its Role never
// syncs, and a watch of the other half's namespace would need the other
// half's grants.
func TestCacheOfEachHalfWatchesOnlyItsOwnNamespaces(t *testing.T) {
	fleet := parse(t, "--controllers=fleet", "--fleet-namespaces=celld,b", "--storage-namespace=st")
	c := cacheOptions(fleet)
	if got := keysOf(c.DefaultNamespaces); !slices.Equal(got, []string{"b", "celld"}) {
		t.Errorf("the fleet half watches namespaces %v, want exactly the fleet namespaces [b celld]", got)
	}
	if len(c.ByObject) != 0 {
		t.Errorf("the fleet half must watch no type outside the fleet namespaces; it has per-type caches %v", c.ByObject)
	}

	storage := parse(t, "--controllers=storage", "--storage-namespace=st")
	c = cacheOptions(storage)
	if got := keysOf(c.DefaultNamespaces); !slices.Equal(got, []string{"st"}) {
		t.Errorf("the storage half watches namespaces %v, want exactly the storage namespace [st]", got)
	}
	if len(c.ByObject) != 1 {
		t.Errorf("the storage half must restrict only its Leases; it has per-type caches %v", c.ByObject)
	}
	for obj, by := range c.ByObject {
		if _, ok := obj.(*coordinationv1.Lease); !ok {
			t.Errorf("unexpected per-type cache for %T", obj)
			continue
		}
		if got := keysOf(by.Namespaces); !slices.Equal(got, []string{"st"}) {
			t.Errorf("Leases watched in %v, want the storage namespace only", got)
		}
		if by.Label == nil || !by.Label.Matches(labels.Set{storagev1alpha1.LabelNode: "n"}) || by.Label.Matches(labels.Set{}) {
			t.Errorf("Leases cached by %v, want only the replica hosts' (labelled %s)", by.Label, storagev1alpha1.LabelNode)
		}
	}
}

// Each half elects its own leader: two Leases, so the fleet operator and the
// storage controllers never wait for each other.
func TestEachHalfTakesItsOwnLeaderElectionLease(t *testing.T) {
	if controllersFleet.leaderElectionID() == controllersStorage.leaderElectionID() {
		t.Fatalf("both halves elect through Lease %q; each needs its own", controllersFleet.leaderElectionID())
	}
}

func parse(t *testing.T, args ...string) options {
	t.Helper()
	o, err := parseFlags(args)
	if err != nil {
		t.Fatalf("parseFlags(%q): %v", args, err)
	}
	return o
}

func keysOf(m map[string]cache.Config) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
