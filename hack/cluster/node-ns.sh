#!/usr/bin/env bash
# node-ns.sh N: holds the mount namespace of node N of the local cluster. cluster-up.sh runs it as
#   unshare --mount --propagation slave -- node-ns.sh N
# and starts that node's containerd and kubelet inside the namespace with nsenter. A real node has
# its own /var/lib/kubelet, /var/lib/cellfleet and /run/cellfleet; here every node shares one
# filesystem, so each of NODE_PATHS gets a per-node directory .cluster/nodes/node-N/<key>
# bind-mounted on it, made rshared: the kubelet refuses a Bidirectional hostPath that is not on a
# shared mount, and the CSI plugins' mounts must propagate back to the node's kubelet and on into
# the consumer Pods. "slave" keeps the host's own mounts visible in the node without the node's
# mounts leaking to the host or to the other nodes. Writes .cluster/nodes/node-N/ns-ready once the
# mounts are in place, then sleeps until cluster-down.sh kills it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
(($# == 1)) && [[ $1 =~ ^[0-9]+$ ]] || { echo "usage: node-ns.sh N" >&2; exit 2; }
D=$(node_dir "$1")
for p in "${NODE_PATHS[@]}"; do
  src=$D/${p%%:*} dst=${p#*:}
  mkdir -p "$src" "$dst"
  mount --bind "$src" "$dst"
  mount --make-rshared "$dst"
done
touch "$D/ns-ready"
exec sleep infinity
