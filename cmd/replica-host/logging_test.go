package main

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// In Kubernetes mode the host runs a controller-runtime
// manager (internal/replica/kubehost), which logs through
// controller-runtime's global logger. Unset, it printed
// "[controller-runtime] log.SetLogger(...) was never called" with a stack
// trace 30 s after the start and dropped every log line of the manager. The
// host's logger is that logger: what controller-runtime logs is in the
// host's JSON log, at the host's level.
func TestControllerRuntimeLogsInTheHostsLog(t *testing.T) {
	var out lockedBuffer
	newLogger(&out, slog.LevelInfo)
	ctrllog.Log.WithName("probe").Info("controller-runtime line", "key", "value")
	ctrllog.Log.WithName("probe").V(1).Info("controller-runtime debug line")
	got := out.String()
	if !strings.Contains(got, `"msg":"controller-runtime line"`) || !strings.Contains(got, `"key":"value"`) {
		t.Fatalf("controller-runtime's log line is not in the host's log; got %q", got)
	}
	if strings.Contains(got, "debug line") {
		t.Errorf("a V(1) line passed the host's info level: %q", got)
	}
}
