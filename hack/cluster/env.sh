# env.sh: names and addresses shared by cluster-up.sh, cluster-down.sh and node.sh.
# Sourced, never run. Every name the cluster creates on the host starts with "cf"
# (bridges cf0 and cf-cniN, cgroups cf-node-N, sockets under /run/cellfleet) so
# teardown can remove exactly what we made and nothing else.
CLUSTER_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
W=${CLUSTER_DIR:-$CLUSTER_ROOT/.cluster}   # all persistent state, logs, pids, kubeconfigs
NODES=${NODES:-3}
HOSTIP=10.200.0.1                          # apiserver and CoreDNS: kube-apiserver refuses loopback
BRIDGE=cf0
# containerd sockets and runtime state: a short path (unix sockets are limited to 108 bytes, and CI
# clones the repository into a folder of unknown depth).
RUNDIR=/run/cellfleet
ZONES=(zone-a zone-b zone-c zone-d zone-e zone-f zone-g zone-h zone-i)

node_ip() { echo "10.200.0.$((10 + $1))"; }
node_dir() { echo "$W/nodes/node-$1"; }
node_sock() { echo "$RUNDIR/ctrd-$1/containerd.sock"; }
node_zone() { echo "${ZONES[$(($1 - 1))]}"; }
