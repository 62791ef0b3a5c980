package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// NodeCredentialsPrefix begins the name of every per-node ServiceAccount,
// Role and RoleBinding (docs/decisions/0007-per-node-credentials.md).
const NodeCredentialsPrefix = "cellfleet-node-"

// maxSubdomain is the longest DNS-1123 subdomain: a ServiceAccount name must
// be one, and so is every node name.
const maxSubdomain = 253

// nodeHashLen is how many hex digits of a node name's digest keep cut names
// distinct.
const nodeHashLen = 8

// NodeCredentialsName is the name of the ServiceAccount (and of its Role and
// RoleBinding) through which the replica host of node reads the Secrets of
// that node's replicas. It is NodeCredentialsPrefix + node whenever that fits
// a DNS subdomain, which is every node name of at most 238 characters: the
// token-exchange admission policy compares exactly that, since CEL cannot
// hash. A longer node name is cut and followed by a digest of the whole
// name, so the result is always a valid, distinct name; the policy admits no
// exchange for such a node (deny by default), and the volume controller never
// places a replica there anyway (a replica's node is a label value, at most
// 63 characters).
func NodeCredentialsName(node string) string {
	if len(NodeCredentialsPrefix)+len(node) <= maxSubdomain {
		return NodeCredentialsPrefix + node
	}
	sum := sha256.Sum256([]byte(node))
	keep := maxSubdomain - len(NodeCredentialsPrefix) - nodeHashLen - 1
	cut := strings.TrimRight(node[:keep], "-.")
	return NodeCredentialsPrefix + cut + "-" + hex.EncodeToString(sum[:])[:nodeHashLen]
}
