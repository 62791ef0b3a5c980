package proccluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// ReplicaHostPackage is the replica host's command.
const ReplicaHostPackage = "github.com/cellfleet/cellfleet/cmd/replica-host"

// builds holds one build per import path for the life of the test binary:
// linking a command costs more than starting a cluster, and a package's
// tests start dozens of clusters.
var builds struct {
	dirOnce sync.Once
	dir     string
	dirErr  error
	byPath  sync.Map // import path -> *build
}

type build struct {
	once sync.Once
	bin  string
	err  error
}

// Binary returns the path of the command at importPath (of this module or
// one it requires, such as go-fuse's loopback example), built on first use
// into a directory shared by the test binary. TestMain removes that
// directory with RemoveBinaries once its tests have run.
func Binary(importPath string) (string, error) {
	v, _ := builds.byPath.LoadOrStore(importPath, &build{})
	b := v.(*build)
	b.once.Do(func() { b.bin, b.err = buildInto(importPath) })
	return b.bin, b.err
}

// ReplicaHost is Binary(ReplicaHostPackage), failing the test when it
// cannot be built.
func ReplicaHost(t testing.TB) string {
	t.Helper()
	bin, err := Binary(ReplicaHostPackage)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// RemoveBinaries removes what Binary built; TestMain calls it once the
// tests have run.
func RemoveBinaries() {
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
}

func buildInto(importPath string) (string, error) {
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, filepath.Base(importPath))
	cmd := exec.Command("go", "build", "-o", bin, importPath)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w", importPath, err)
	}
	return bin, nil
}

// binDir creates the shared directory once. It is world-readable: FUSE
// tests run some of the binaries as an unprivileged user, and a build
// holds nothing secret.
func binDir() (string, error) {
	builds.dirOnce.Do(func() {
		builds.dir, builds.dirErr = os.MkdirTemp("", "cellfleet-test-bin-")
		if builds.dirErr == nil {
			builds.dirErr = os.Chmod(builds.dir, 0o755)
		}
		if builds.dirErr != nil {
			builds.dirErr = fmt.Errorf("directory for test binaries: %w", builds.dirErr)
		}
	})
	return builds.dir, builds.dirErr
}
