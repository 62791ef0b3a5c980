package member

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartupDenialMarkerRefusesOnlyTheNamedPod proves the marker's meaning:
// the Pod it names (or a Pod that cannot tell its UID) is refused, any other
// Pod starts on the disk, and a disk without a marker starts.
func TestStartupDenialMarkerRefusesOnlyTheNamedPod(t *testing.T) {
	const retired = "0b8c2a3e-6f1d-4c59-9a47-1e2d3c4b5a69"
	dir := t.TempDir()
	if err := checkDenial(dir, retired); err != nil {
		t.Fatalf("a disk without a marker must start: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, DenialName), []byte(retired+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pod    string
		denied bool
	}{{retired, true}, {"", true}, {"5e7f0a1b-2c3d-4e5f-8a9b-0c1d2e3f4a5b", false}} {
		err := checkDenial(dir, tc.pod)
		if got := errors.Is(err, ErrStartupDenied); got != tc.denied {
			t.Errorf("Pod %q on a disk whose marker names %s: denied=%t, want %t (err %v)", tc.pod, retired, got, tc.denied, err)
		}
	}
}

// TestPodUIDFromMountinfoReadsTheKubeletPodDirectory proves the Pod UID is
// read from the bind mounts the kubelet makes from its per-Pod directory.
func TestPodUIDFromMountinfoReadsTheKubeletPodDirectory(t *testing.T) {
	info := strings.Join([]string{
		"1021 1002 0:120 / / rw,relatime master:300 - overlay overlay rw,lowerdir=/x",
		"1030 1021 8:1 /work/cluster/kubelet/pods/7d2c1f0e-3b4a-4c5d-9e8f-0a1b2c3d4e5f/etc-hosts /etc/hosts rw,relatime - ext4 /dev/sda1 rw",
	}, "\n")
	if got := PodUIDFromMountinfo(strings.NewReader(info)); got != "7d2c1f0e-3b4a-4c5d-9e8f-0a1b2c3d4e5f" {
		t.Fatalf("the Pod UID must come from the kubelet's pods/<uid>/ directory; got %q", got)
	}
	if got := PodUIDFromMountinfo(strings.NewReader("1021 1002 0:120 / / rw - overlay overlay rw")); got != "" {
		t.Fatalf("outside a Pod the UID must be unknown; got %q", got)
	}
}
