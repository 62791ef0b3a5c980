package member

// The startup-denial marker (docs/fleet-operator.md, "Migration from v0.0.5
// and the 0023 controller"): the v0.0.5 launcher retired a member by stopping
// it and writing, on its disk, a marker naming that exact Pod's UID, so the
// retired Pod could not start again while a new Pod (a new UID) may reuse the
// disk. celldsim honours a marker of its own with the same meaning:
// DenialName in CELLD_WATCH holds one Pod UID; celldsim refuses to start when
// it names its own Pod UID, and starts, on the disk and its records, under
// any other UID. When a marker is present and celldsim cannot tell its own
// Pod UID, it refuses too: it cannot show that it is not the retired Pod.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// DenialName is the marker file in the member's disk.
const DenialName = "celldsim.denied-pod-uid"

// ErrStartupDenied says the marker on the disk names this Pod.
var ErrStartupDenied = errors.New("startup denied by the marker on the member's disk")

// checkDenial refuses a start that the disk's marker denies.
func checkDenial(watch, podUID string) error {
	b, err := os.ReadFile(filepath.Join(watch, DenialName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read startup-denial marker in %s: %w", watch, err)
	}
	denied := string(bytes.TrimSpace(b))
	switch {
	case podUID == "":
		return fmt.Errorf("marker denies Pod %s and this Pod's UID is unknown: %w", denied, ErrStartupDenied)
	case denied == podUID:
		return fmt.Errorf("marker denies this Pod (%s): %w", podUID, ErrStartupDenied)
	}
	return nil
}

// podDir matches the kubelet's per-Pod directory, .../pods/<uid>/..., that
// the container's bind mounts (/etc/hosts, the termination log, volumes)
// come from.
var podDir = regexp.MustCompile(`/pods/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/`)

// PodUIDFromMountinfo reads the Pod's UID from the container's
// /proc/self/mountinfo (the root of each bind mount the kubelet made from
// its per-Pod directory): the PersistentFleet contract gives celld only its
// Pod name. It returns "" when no mount names a Pod directory.
func PodUIDFromMountinfo(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if m := podDir.FindStringSubmatch(fields[3] + "/"); m != nil {
			return m[1]
		}
	}
	return ""
}
