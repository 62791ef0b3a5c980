package volume

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cellfleet/cellfleet/internal/csi/local"
)

// Replica names are valid DNS-1035 labels of at most 63 characters whatever
// the volume name (csi-sanity uses 128-character names), deterministic, and
// distinct for volumes that share a long prefix.
func TestReplicaNameFitsADNSLabel(t *testing.T) {
	long := "v" + strings.Repeat("a", 127)
	longer := long[:127] + "b"
	for _, vol := range []string{"data", strings.Repeat("x", 60), strings.Repeat("y", 61), long, "a" + strings.Repeat("-", 70) + "z"} {
		for _, i := range []int{0, 4} {
			name := ReplicaName(vol, i)
			if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
				t.Errorf("ReplicaName(%d chars, %d) = %q (%d chars): %v", len(vol), i, name, len(name), errs)
			}
			if name != ReplicaName(vol, i) {
				t.Errorf("ReplicaName(%q, %d) is not deterministic", vol, i)
			}
		}
	}
	if ReplicaName("data", 2) != "data-r2" {
		t.Errorf("ReplicaName(data, 2) = %q, want data-r2", ReplicaName("data", 2))
	}
	if ReplicaName(long, 0) == ReplicaName(longer, 0) {
		t.Errorf("volumes differing past the cut share replica name %q", ReplicaName(long, 0))
	}
}

// The eligibility label is the local driver's topology key: a node carries
// it once local.storage.eric.dev registered there.
func TestLocalStorageLabelIsTheLocalDriversTopologyKey(t *testing.T) {
	if LocalStorageLabel != local.TopologyKey {
		t.Fatalf("LocalStorageLabel = %q, local driver topology key = %q", LocalStorageLabel, local.TopologyKey)
	}
}

// A node's port is never handed out twice, the lowest free one is reused,
// and a full range is an error naming the node.
func TestPortBookHandsEachPortOnce(t *testing.T) {
	r := PortRange{Base: 20000, Count: 3}
	b := portBook{}
	b.take("n1", 20001)
	seen := map[int32]bool{20001: true}
	for i := 0; i < 2; i++ {
		p, err := b.next("n1", r)
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	if _, err := b.next("n1", r); err == nil || !strings.Contains(err.Error(), "node n1 has no free replica port") {
		t.Fatalf("full range: err = %v, want one naming node n1", err)
	}
	if p, _ := b.next("n2", r); p != 20000 {
		t.Fatalf("another node's first port = %d, want 20000", p)
	}
}
