package volume

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxLabel is the longest DNS label (RFC 1035): Service names must be one.
const maxLabel = 63

// hashLen is how many hex digits of a name's digest keep truncated names
// distinct.
const hashLen = 8

// ReplicaName is the name of replica i of a volume: its VolumeReplica, its
// selectorless Service and its backing claim all carry it, so one name is the
// replica's identity everywhere (it keeps its claim and its Service DNS name
// for good: docs/architecture.md, "Replicated volume";
// docs/volume-controller.md, "Objects per volume"). It is `<volume>-r<i>`
// when that fits a DNS label; a longer volume name is cut and followed by a
// digest of the whole name, so distinct volumes never share replica names and
// the result is always a valid DNS-1035 label of at most 63 characters.
func ReplicaName(volume string, i int) string {
	suffix := "-r" + strconv.Itoa(i)
	if len(volume)+len(suffix) <= maxLabel {
		return volume + suffix
	}
	sum := sha256.Sum256([]byte(volume))
	digest := hex.EncodeToString(sum[:])[:hashLen]
	keep := maxLabel - len(suffix) - hashLen - 1
	prefix := strings.TrimRight(volume[:keep], "-")
	return prefix + "-" + digest + suffix
}

// replicaIndex is the index i of a name ReplicaName(volume, i) gave, and
// false for any other name.
func replicaIndex(volume, name string) (int, bool) {
	at := strings.LastIndex(name, "-r")
	if at < 0 {
		return 0, false
	}
	i, err := strconv.Atoi(name[at+2:])
	if err != nil || i < 0 || ReplicaName(volume, i) != name {
		return 0, false
	}
	return i, true
}

// replicaSecretName is the Secret holding one replica's certificate, key and
// tokens, read by the replica host of the replica's node.
func replicaSecretName(replica string) string { return replica + "-tls" }

// mountSecretName is the Secret holding what a mount owner needs: the
// volume's CA certificate and the mount token, never a private key.
func mountSecretName(volume string) string { return volume + "-mount" }

// caSecretName is the Secret in the manager's namespace holding the volume's
// CA key; nothing outside the manager reads it.
func caSecretName(volume string) string { return "rv-" + volume + "-ca" }

// serviceDNSName is a replica Service's in-cluster DNS name: the address
// peers dial and the SAN of the replica's certificate.
func serviceDNSName(service, namespace string) string {
	return service + "." + namespace + ".svc"
}
