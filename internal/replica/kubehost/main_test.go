package kubehost_test

import (
	"testing"

	"github.com/cellfleet/cellfleet/internal/testenv"
	"github.com/cellfleet/cellfleet/internal/testenv/nodestack"
)

var (
	env        *testenv.Env
	hostBinary string
)

// TestMain builds the real replica-host binary (the tests run it as
// processes, one per "node") and starts one real API server.
func TestMain(m *testing.M) { nodestack.Main(m, &env, &hostBinary) }
