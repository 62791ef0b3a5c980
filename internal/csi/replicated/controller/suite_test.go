package controller_test

// The CSI controller is tested against a real kube-apiserver and etcd with
// the generated CRDs installed (internal/testenv), through its gRPC server on
// a unix socket. There is no volume controller in these tests: where a
// volume must become Placed and Ready, or a finalizer must hold it, the test
// itself writes what the volume controller would (standInVolumeController),
// and says so. The end-to-end path is tested with the volume controller.

import (
	"testing"

	"github.com/cellfleet/cellfleet/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }
