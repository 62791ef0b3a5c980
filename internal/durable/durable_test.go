package durable_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cellfleet/cellfleet/internal/durable"
)

type state struct {
	Volumes map[string]int `json:"volumes"`
}

func TestJSONRoundTripReplacesTheFileAndLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	for _, n := range []int{1, 2} {
		if err := durable.WriteJSON(p, state{Volumes: map[string]int{"v": n}}); err != nil {
			t.Fatal(err)
		}
		var got state
		found, err := durable.ReadJSON(p, &got)
		if err != nil || !found || got.Volumes["v"] != n {
			t.Fatalf("read back = %+v, found=%t, err=%v; want v=%d", got, found, err, n)
		}
	}
	if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("a temporary file was left behind: %v", err)
	}
}

func TestMissingStateIsFreshButCorruptStateIsAnError(t *testing.T) {
	dir := t.TempDir()
	var s state
	found, err := durable.ReadJSON(filepath.Join(dir, "absent.json"), &s)
	if found || err != nil {
		t.Fatalf("missing file: found=%t err=%v, want a fresh state", found, err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"volumes": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := durable.ReadJSON(bad, &s); err == nil || !strings.Contains(err.Error(), "is corrupt") {
		t.Fatalf("a torn state file was accepted: %v", err)
	}
}
