package kubehost_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cellfleet/cellfleet/internal/testenv"
)

var (
	env        *testenv.Env
	hostBinary string
)

// TestMain builds the real replica-host binary (the tests run it as three
// processes, one per "node") and starts one real API server.
func TestMain(m *testing.M) {
	// One fixed directory, overwritten by each run: testenv.Main exits the
	// process, so nothing after it would remove a fresh one.
	dir := filepath.Join(os.TempDir(), "cellfleet-kubehost-test-bin")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hostBinary = filepath.Join(dir, "replica-host")
	build := exec.Command("go", "build", "-o", hostBinary, "github.com/cellfleet/cellfleet/cmd/replica-host")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building replica-host for the Kubernetes-mode tests failed:", err)
		os.Exit(1)
	}
	testenv.Main(m, &env)
}
