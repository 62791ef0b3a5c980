package processtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

// A second replica-host on a running host's state directory, with its own
// admin socket and status listener so that only the state directory is
// shared, exits non-zero at once naming the first one's PID; the first
// keeps serving (docs/replica-engine.md, "replica-host").
func TestASecondHostOnTheSameStateDirectoryExitsNamingTheFirst(t *testing.T) {
	c := startCluster(t, clusterOpts{replicas: 1})
	first := c.Pid(0)
	sockDir, err := os.MkdirTemp("", "rh2-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	var out bytes.Buffer
	second := exec.Command(proccluster.ReplicaHost(t), "-config", c.HostFiles[0], "-admin-socket", filepath.Join(sockDir, "second.sock"),
		"-status-listen", "127.0.0.1:0")
	second.Stdout, second.Stderr = &out, &out
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		_ = second.Process.Kill()
		<-done
		t.Fatalf("a second host on the state directory of pid %d still runs after 20s:\n%s", first, out.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("the second host exited with %v, want a non-zero exit:\n%s", err, out.String())
	}
	if want := fmt.Sprintf("pid %d", first); !strings.Contains(out.String(), want) {
		t.Fatalf("the second host's refusal does not name the first host (%s):\n%s", want, out.String())
	}
	if _, err := c.ReplicaStatus(0); err != nil {
		t.Fatalf("the first host stopped serving after the second was refused: %v", err)
	}
}
