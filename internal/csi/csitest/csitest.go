// Package csitest holds TEST-ONLY helpers of the CSI packages: serving a
// driver on a unix socket in-process, unmounting everything a test mounted,
// and summarising which csi-sanity specs ran.
//
// Production code must never import it.
package csitest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/onsi/ginkgo/v2/types"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
	"github.com/cellfleet/cellfleet/internal/csi/server"
)

// RequireRoot skips, saying why, when the test cannot mount. Under CI, which
// always has root and /dev/fuse, a missing prerequisite fails the test
// instead: CI must never skip these suites.
func RequireRoot(t testing.TB) {
	t.Helper()
	missing := ""
	if os.Geteuid() != 0 {
		missing = "mounting needs root (CI and the dev machine run tests as root)"
	} else if _, err := os.Stat("/dev/fuse"); err != nil {
		missing = fmt.Sprintf("FUSE tests need /dev/fuse: %v", err)
	}
	switch {
	case missing == "":
	case os.Getenv("CI") != "":
		t.Fatalf("CI must run this suite, but %s", missing)
	default:
		t.Skip(missing)
	}
}

// Serve runs svc on a unix socket under dir until the test ends and
// returns the socket path.
func Serve(t testing.TB, dir string, svc server.Services) string {
	t.Helper()
	socket := filepath.Join(dir, "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, slog.Default(), socket, svc, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("CSI server: %v", err)
		}
	})
	// The server listens in its goroutine: a client that dials before the
	// socket exists fails its first call at once (gRPC does not wait for a
	// unix socket to appear), so hand the path out only once it is there.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(socket); err == nil {
			return socket
		}
		select {
		case err := <-done:
			done <- err // the cleanup reads it again
			t.Fatalf("CSI server on %s stopped before it listened: %v", socket, err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("CSI server: %s not listening within 30s", socket)
		}
	}
}

// Dial connects to a CSI socket.
func Dial(t testing.TB, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", socket, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// NodeClient and ControllerClient are shorthands.
func NodeClient(conn *grpc.ClientConn) csi.NodeClient { return csi.NewNodeClient(conn) }

// ControllerClient returns a Controller client.
func ControllerClient(conn *grpc.ClientConn) csi.ControllerClient {
	return csi.NewControllerClient(conn)
}

// CleanupMounts registers a cleanup that detaches every mount beneath base,
// deepest first, so no test leaves a mount behind even when it fails.
func CleanupMounts(t testing.TB, base string) {
	t.Helper()
	t.Cleanup(func() {
		ms, err := mountpath.ReadMounts(mountpath.SelfMountInfo)
		if err != nil {
			t.Errorf("read mounts: %v", err)
			return
		}
		var points []string
		for _, m := range ms {
			if mountpath.Within(base, m.MountPoint) {
				points = append(points, m.MountPoint)
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(points)))
		for _, p := range points {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && err != unix.EINVAL {
				t.Errorf("cleanup: unmount %s: %v", p, err)
			}
		}
	})
}

// SanitySummary lists which csi-sanity specs passed, failed and skipped.
type SanitySummary struct {
	Passed, Failed, Skipped []string
}

// Summarise reads a ginkgo report.
func Summarise(r types.Report) SanitySummary {
	var s SanitySummary
	for _, sp := range r.SpecReports {
		if sp.LeafNodeType != types.NodeTypeIt {
			continue
		}
		name := sp.FullText()
		switch {
		case sp.State.Is(types.SpecStatePassed):
			s.Passed = append(s.Passed, name)
		case sp.State.Is(types.SpecStateSkipped | types.SpecStatePending):
			s.Skipped = append(s.Skipped, name)
		default:
			s.Failed = append(s.Failed, name)
		}
	}
	return s
}

// Log writes the summary to the test log.
func (s SanitySummary) Log(t testing.TB) {
	t.Helper()
	t.Logf("csi-sanity: %d passed, %d failed, %d skipped", len(s.Passed), len(s.Failed), len(s.Skipped))
	for _, n := range s.Passed {
		t.Logf("  ran, passed: %s", n)
	}
	for _, n := range s.Failed {
		t.Logf("  ran, FAILED: %s", n)
	}
	for _, n := range s.Skipped {
		t.Logf("  skipped (capability not implemented): %s", n)
	}
}

// RequirePassed fails unless every named spec (substring of its full text) passed.
func (s SanitySummary) RequirePassed(t testing.TB, specs ...string) {
	t.Helper()
	for _, want := range specs {
		found := false
		for _, n := range s.Passed {
			if strings.Contains(n, want) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("csi-sanity spec %q must run and pass for the implemented capabilities", want)
		}
	}
	if len(s.Failed) > 0 {
		t.Errorf("csi-sanity: %d specs failed: %s", len(s.Failed), fmt.Sprint(s.Failed))
	}
}

// MkdirAll creates directories or fails the test.
func MkdirAll(t testing.TB, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("mkdir %s: %v", d, err)
		}
	}
}

// ShortHash is a short stable hex digest, for deriving test volume IDs.
func ShortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
