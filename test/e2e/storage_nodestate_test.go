package e2e

// What a node of the local cluster keeps outside the API server, as this
// host reaches it (hack/cluster/env.sh, NODE_PATHS; hack/cluster/node-ns.sh).
// A node's /var/lib/cellfleet is this host's directory
// .cluster/nodes/<node>/cellfleet, but its mounts (the mount owner's FUSE
// sessions, the local driver's publications) exist only in the node's own
// mount namespace, held by a process whose pid cluster-up.sh records in
// .cluster/pids/ns-<n>.pid. A path of the node is reached through that
// process's /proc/<pid>/root, which crosses the node's mounts, and its mount
// table is /proc/<pid>/mountinfo. Every scenario using these needs
// cluster.PowerHostDisks.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// nodeStatePath is elem, relative to the node's /var/lib/cellfleet (the
// NODE DaemonSet's hostPaths, config/node/daemonset.yaml), as this host
// sees it.
func nodeStatePath(node string, elem ...string) string {
	return filepath.Join(append([]string{env.StateDir, "nodes", node, "cellfleet"}, elem...)...)
}

// nodeNamespace is /proc/<pid> of the process holding node's mount
// namespace.
func nodeNamespace(node string) (string, error) {
	n, ok := strings.CutPrefix(node, "node-")
	if !ok {
		return "", fmt.Errorf("node %q is not one of the local cluster's (node-N)", node)
	}
	pidFile := filepath.Join(env.StateDir, "pids", "ns-"+n+".pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return "", fmt.Errorf("the mount namespace of %s: %w", node, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return "", fmt.Errorf("the mount namespace of %s: %s: %w", node, pidFile, err)
	}
	proc := "/proc/" + strconv.Itoa(pid)
	if _, err := os.Stat(filepath.Join(proc, "ns", "mnt")); err != nil {
		return "", fmt.Errorf("the mount namespace of %s (pid %d, %s) is gone: %w", node, pid, pidFile, err)
	}
	return proc, nil
}

// inNode is path, absolute in node's filesystem, as this host reaches it
// with the node's mounts.
func (s *volumeScenario) inNode(node, path string) string {
	s.t.Helper()
	proc, err := nodeNamespace(node)
	if err != nil {
		s.t.Fatal(err)
	}
	return filepath.Join(proc, "root", path)
}

// nodeMountPoints is every mount point of node's mount namespace.
func nodeMountPoints(node string) (map[string]bool, error) {
	proc, err := nodeNamespace(node)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(proc, "mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("the mount table of %s: %w", node, err)
	}
	points := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		// ID, parent ID, major:minor, root, mount point, ...
		if f := strings.Fields(line); len(f) > 4 {
			points[mountinfoUnescape.Replace(f[4])] = true
		}
	}
	return points, nil
}

// mountinfoUnescape undoes the octal escapes of /proc/<pid>/mountinfo.
var mountinfoUnescape = strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)

// nodeMounted says whether path is a mount point on node.
func (s *volumeScenario) nodeMounted(node, path string) bool {
	s.t.Helper()
	points, err := nodeMountPoints(node)
	if err != nil {
		s.t.Fatal(err)
	}
	return points[path]
}
