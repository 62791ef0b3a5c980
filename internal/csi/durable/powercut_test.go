package durable_test

import (
	"path/filepath"
	"testing"

	"github.com/cellfleet/cellfleet/internal/csi/durable"
	"github.com/cellfleet/cellfleet/internal/testfs/powercut"
)

// A driver's volume table that Save acknowledged survives a power cut whole:
// the last saved version, never an older one or a torn one.
func TestSavedTableSurvivesAPowerCut(t *testing.T) {
	p := powercut.MountT(t)
	path := filepath.Join(p.Mountpoint(), "state.json")
	tab, err := durable.LoadTable[int](path, "test table")
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		v := n
		tab.Volumes["v"] = &v
		if err := tab.Save(); err != nil {
			t.Fatalf("save %d: %v", n, err)
		}
	}
	lost := p.CutT(t)
	after, err := durable.LoadTable[int](path, "test table")
	if err != nil {
		t.Fatalf("table after the power cut: %v", err)
	}
	if v := after.Volumes["v"]; v == nil || *v != 3 {
		t.Fatalf("after a power cut the table holds %v, want the last saved 3 (cut dropped %+v)", v, lost)
	}
}
