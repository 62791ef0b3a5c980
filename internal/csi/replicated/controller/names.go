package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Why names are derived: a CSI volume name may be up to 128 characters of
// anything (csi-sanity uses 128), but a ReplicatedVolume's name prefixes its
// replica Services `<volume>-r<i>`, so the API refuses names that are not
// DNS-1035 labels of at most MaxVolumeNameLength characters. The derivation
// is a pure function of the CSI name, so a retried CreateVolume (even from a
// restarted provisioner or manager) finds the object it created before; the
// CSI name itself is kept in AnnotationCSIName and compared on every lookup.

// MaxVolumeNameLength is the ReplicatedVolume name limit of the API (60: the
// Service `<volume>-r<i>` must stay a 63-character DNS label).
const MaxVolumeNameLength = 60

// hashLength is how many hex digits of sha256(CSI name) a derived name
// carries: 40 bits, so an accidental collision is negligible, and one that
// happens anyway is refused because the annotation names another CSI name.
const hashLength = 10

// derivedPrefix starts a derived name whose CSI name does not start with a
// letter (a DNS-1035 label must).
const derivedPrefix = "rv-"

// AnnotationCSIName records the CSI name a ReplicatedVolume was created for.
const AnnotationCSIName = "replicated.storage.eric.dev/csi-name"

// VolumeName is the ReplicatedVolume name (and CSI volume ID) for a CSI name.
// A name that already is a DNS-1035 label of at most MaxVolumeNameLength
// characters, such as the provisioner's `pvc-<uid>`, is kept as is, so the
// PV name and the volume name agree and StorageClass templates such as
// `${pv.name}` name the volume's objects. Any other name becomes its
// sanitised prefix, a dash and hashLength hex digits of its sha256.
func VolumeName(csiName string) string {
	if isVolumeName(csiName) {
		return csiName
	}
	sum := sha256.Sum256([]byte(csiName))
	suffix := hex.EncodeToString(sum[:])[:hashLength]
	prefix := sanitise(csiName)
	if prefix == "" || prefix[0] < 'a' || prefix[0] > 'z' {
		prefix = derivedPrefix + prefix
	}
	if max := MaxVolumeNameLength - 1 - hashLength; len(prefix) > max {
		prefix = prefix[:max]
	}
	prefix = strings.TrimRight(prefix, "-")
	return prefix + "-" + suffix
}

// isVolumeName says whether s may name a ReplicatedVolume as it is.
func isVolumeName(s string) bool {
	return len(s) <= MaxVolumeNameLength && len(validation.IsDNS1035Label(s)) == 0
}

// sanitise lower-cases s and replaces every character a DNS label cannot
// hold with '-', collapsing runs, so the derived name stays readable.
func sanitise(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		ok := (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= MaxVolumeNameLength {
			break
		}
	}
	return strings.TrimRight(b.String(), "-")
}
