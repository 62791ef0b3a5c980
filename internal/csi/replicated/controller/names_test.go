package controller

import (
	"strings"
	"testing"
)

func TestVolumeNameIsAValidDeterministicLabelForAnyCSIName(t *testing.T) {
	names := []string{
		"pvc-0f8e7c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b",
		"sanity-controller-create-single-no-capacity-" + strings.Repeat("A", 83), // 128, upper case
		strings.Repeat("x", 128), strings.Repeat("x", 127),
		"1-starts-with-a-digit", "UPPER", "with.dots_and_underscores", "---", "ends-with-dash-",
		strings.Repeat("a", 60), strings.Repeat("a", 61),
	}
	seen := map[string]string{}
	for _, n := range names {
		got := VolumeName(n)
		if !isVolumeName(got) {
			t.Errorf("VolumeName(%q) = %q: not a DNS-1035 label of at most %d characters", n, got, MaxVolumeNameLength)
		}
		if len(got)+len("-r4") > 63 {
			t.Errorf("VolumeName(%q) = %q leaves no room for the Service suffix -r4 within 63 characters", n, got)
		}
		if again := VolumeName(n); again != got {
			t.Errorf("VolumeName(%q) must be deterministic: %q then %q", n, got, again)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("VolumeName gives %q for both %q and %q", got, prev, n)
		}
		seen[got] = n
	}
	if id := "pvc-0f8e7c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b"; VolumeName(id) != id {
		t.Errorf("a provisioner name pvc-<uid> is a valid volume name and must be kept, got %q", VolumeName(id))
	}
}
