package durable_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cellfleet/cellfleet/internal/durable"
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

// A file written and then removed with RemoveFile stays removed after a
// power cut, and a file WriteFile acknowledged keeps its last content: the
// directory's entries are fsynced, not only the file's bytes.
func TestWrittenAndRemovedFilesSurviveAPowerCut(t *testing.T) {
	p := powercut.MountT(t)
	kept := filepath.Join(p.Mountpoint(), "kept")
	gone := filepath.Join(p.Mountpoint(), "gone")
	for _, f := range []string{kept, gone} {
		if err := durable.WriteFile(f, []byte("v1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := durable.WriteFile(kept, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if err := durable.RemoveFile(gone); err != nil {
		t.Fatal(err)
	}
	lost := p.CutT(t)
	if b, err := os.ReadFile(kept); err != nil || string(b) != "v2" {
		t.Fatalf("after a power cut %s holds %q (%v), want the acknowledged v2 (cut dropped %+v)", kept, b, err, lost)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Fatalf("a removal RemoveFile acknowledged came back after a power cut (stat: %v; cut dropped %+v)", err, lost)
	}
	if _, err := os.Stat(kept + durable.TempSuffix); !os.IsNotExist(err) {
		t.Fatalf("a temporary file survived the cut: %v", err)
	}
}

// A directory made with MkdirAll, and a file synced inside it, survive a
// power cut; made with os.MkdirAll, the directory's entry was never synced
// in its parent and the cut takes it away with the synced file (a replica's
// data directory lost that way came back with an empty journal).
func TestDirectoriesMadeDurablySurviveAPowerCut(t *testing.T) {
	p := powercut.MountT(t)
	durableDir := filepath.Join(p.Mountpoint(), "a", "data")
	plainDir := filepath.Join(p.Mountpoint(), "b", "data")
	if err := durable.MkdirAll(durableDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(plainDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{durableDir, plainDir} {
		if err := durable.WriteFile(filepath.Join(d, "identity"), []byte("r0")); err != nil {
			t.Fatal(err)
		}
	}
	lost := p.CutT(t)
	if b, err := os.ReadFile(filepath.Join(durableDir, "identity")); err != nil || string(b) != "r0" {
		t.Fatalf("after a power cut the durably made directory's file reads %q, %v (cut dropped %+v)", b, err, lost)
	}
	if _, err := os.Stat(plainDir); !os.IsNotExist(err) {
		t.Fatalf("a directory os.MkdirAll made (never synced in its parent) survived the cut (%v): the fault was not injected", err)
	}
	if err := durable.MkdirAll(durableDir, 0o700); err != nil {
		t.Fatalf("MkdirAll of an existing directory: %v", err)
	}
}
