# env.sh: names and addresses shared by cluster-up.sh, cluster-down.sh and node.sh.
# Sourced, never run. Every name the cluster creates on the host starts with "cf"
# (bridges cf0 and cf-cniN, cgroups cf-node-N, sockets under /run/cf-cluster) so
# teardown can remove exactly what we made and nothing else.
CLUSTER_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
W=${CLUSTER_DIR:-$CLUSTER_ROOT/.cluster}   # all persistent state, logs, pids, kubeconfigs
# The fleet suites run on 3 nodes; the storage suites on their own 4-node bring-up (issue 13:
# a replica is replaced on a fourth eligible node). CLUSTER_NODES is the documented name.
NODES=${CLUSTER_NODES:-${NODES:-3}}
HOSTIP=10.200.0.1                          # apiserver and CoreDNS: kube-apiserver refuses loopback
BRIDGE=cf0
# containerd sockets and runtime state: a short path (unix sockets are limited to 108 bytes, and CI
# clones the repository into a folder of unknown depth). Not /run/cellfleet: that is a product path
# (the mount owner's socket) and each node has its own copy of it.
RUNDIR=/run/cf-cluster
# One local cluster per machine: its names (bridge, addresses, cgroups, RUNDIR) are fixed. OWNER
# records the state directory of the clone whose cluster runs (cluster-up.sh writes it, and refuses
# to start beside another clone's cluster; cluster-down.sh leaves another clone's cluster alone).
# e2e.sh holds LOCK for its whole run, so a second e2e on the machine waits instead of colliding.
OWNER=/run/cf-cluster.owner
LOCK=/run/cf-cluster.lock
ZONES=(zone-a zone-b zone-c zone-d zone-e zone-f zone-g zone-h zone-i)
# NODE_PATHS: the host paths every real node has its own copy of, which the NODE DaemonSet and the
# kubelet use as hostPaths or fixed paths (the kubelet's device-plugins and pki directories live
# under /var/lib/kubelet whatever --root-dir says). Each node's containerd and kubelet run in a
# mount namespace of their own where .cluster/nodes/node-N/<key> is bind-mounted, rshared, on each
# (node-ns.sh), so the nodes do not collide and Bidirectional propagation works as on a real node.
NODE_PATHS=(kubelet:/var/lib/kubelet cellfleet:/var/lib/cellfleet run:/run/cellfleet)

node_ip() { echo "10.200.0.$((10 + $1))"; }
node_dir() { echo "$W/nodes/node-$1"; }
node_sock() { echo "$RUNDIR/ctrd-$1/containerd.sock"; }
node_zone() { echo "${ZONES[$(($1 - 1))]}"; }
# node_ns_pid N: the pid holding node N's mount namespace (empty when it is gone).
node_ns_pid() {
  local f=$W/pids/ns-$1.pid p
  [[ -f $f ]] && p=$(cat "$f") && [[ -e /proc/$p/ns/mnt ]] && echo "$p"
  return 0
}
# other_owner: the state directory of another clone's cluster running on this machine, if any. An
# owner file without RUNDIR is stale (that cluster is down).
other_owner() {
  local o
  [[ -f $OWNER && -d $RUNDIR ]] && o=$(cat "$OWNER") && [[ $o != "$W" ]] && echo "$o"
  return 0
}
# unmount_below ROOT...: lazily unmounts every mount at or below each ROOT in the caller's mount
# namespace, deepest first. Also run inside each node's namespace (cluster-down.sh, via nsenter).
unmount_below() {
  local r
  for r in "$@"; do
    awk -v r="${r%/}" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
  done
  return 0
}
