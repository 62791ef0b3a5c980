package integration_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/cellfleet/cellfleet/internal/testenv"
	"github.com/cellfleet/cellfleet/internal/testenv/nodestack"
)

var (
	env        *testenv.Env
	hostBinary string
)

// TestMain builds the real replica-host binary and starts one API server.
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "integration-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if hostBinary, err = nodestack.BuildReplicaHost(dir); err != nil {
		fmt.Fprintln(os.Stderr, "the whole-stack tests:", err)
		return 1
	}
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
