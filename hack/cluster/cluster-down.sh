#!/usr/bin/env bash
# cluster-down.sh: removes everything cluster-up.sh created, also after a failed or interrupted
# bring-up: processes (by their recorded pids, then whatever is left in the nodes' own cgroups),
# Pod sandboxes and their network namespaces, mounts, links, cgroups, iptables chains, and the
# state under .cluster/ and /run/cf-cluster; every mount in every node's own mount namespace
# (node-ns.sh) too. Safe to run repeatedly. Keeps bin/ (the build caches).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
K8S=; CRICTL=
[[ -f $W/bin.env ]] && source "$W/bin.env"
log() { echo "[$(date +%T)] cluster-down: $*"; }

# stop NAME: SIGTERM the recorded pid, SIGKILL it after 10 s.
stop() {
  local f=$W/pids/$1.pid p
  [[ -f $f ]] || return 0
  p=$(cat "$f")
  if kill "$p" 2>/dev/null; then
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$p" 2>/dev/null
  fi
  rm -f "$f"
}
# node_count: the nodes of the cluster that ran, whatever NODES says now.
node_count() {
  local n=$NODES d
  for d in "$W"/nodes/node-* "$RUNDIR"/ctrd-* /sys/fs/cgroup/memory/cf-node-* "$W"/pids/ns-*.pid; do
    d=${d%.pid}
    [[ -e $d ]] || continue
    d=${d##*-}; [[ $d =~ ^[0-9]+$ ]] && ((d > n)) && n=$d
  done
  echo "$n"
}
# kill_cgroup_procs N: SIGKILL every process still inside node N's cgroups (containers whose shim died).
kill_cgroup_procs() {
  local pids
  pids=$(find /sys/fs/cgroup/*/cf-node-"$1" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | grep -E '^[0-9]+$')
  [[ -n $pids ]] && kill -9 $pids 2>/dev/null
  return 0
}

other=$(other_owner)
if [[ -n $other ]]; then
  # Every name below (RUNDIR, cgroups cf-node-N, the bridge) is that cluster's now, not ours.
  log "the cluster running on this machine is $other's: removing only $W"
  rm -rf "$W"
  exit 0
fi
N=$(node_count)
log "stopping $N nodes"
for n in $(seq 1 "$N"); do stop "kubelet-$n"; done
for n in $(seq 1 "$N"); do
  S=$(node_sock "$n")
  if [[ -S $S ]]; then
    # CRI teardown first: StopPodSandbox runs CNI DEL, which removes veths, IPAM leases and the
    # masquerade chains, and unmounts the sandbox's network namespace.
    [[ -x $CRICTL ]] && timeout 60 "$CRICTL" -r "unix://$S" rmp -fa >/dev/null 2>&1
    for t in $(ctr -a "$S" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$S" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
    for t in $(ctr -a "$S" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$S" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1; done
    for c in $(ctr -a "$S" -n k8s.io containers ls -q 2>/dev/null); do ctr -a "$S" -n k8s.io containers delete "$c" >/dev/null 2>&1; done
  fi
  stop "containerd-$n"
  # the shims of this node's containerd, matched by its unique socket path
  for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $S( |$)"); do kill -9 "$p" 2>/dev/null; done
  kill_cgroup_procs "$n"
  # The node's mount namespace: every mount the kubelet, containerd and the CSI plugins made there
  # (volumes, FUSE mounts, container rootfs, network namespaces, the NODE_PATHS binds), then its holder.
  p=$(node_ns_pid "$n")
  if [[ -n $p ]]; then
    roots=("$W" "$RUNDIR"); for q in "${NODE_PATHS[@]}"; do roots+=("${q#*:}"); done
    nsenter "--mount=/proc/$p/ns/mnt" -- bash -c "$(declare -f unmount_below); unmount_below ${roots[*]@Q}"
  fi
  stop "ns-$n"
done
for c in provisioner coredns kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$c"; done
for f in "$W"/pids/*.pid; do [[ -f $f ]] && stop "$(basename "$f" .pid)"; done   # anything a test started
[[ -x $K8S/kube-proxy ]] && "$K8S/kube-proxy" --cleanup >/dev/null 2>&1

log "unmounting and removing state"
# Mounts below our state dirs: kubelet volumes, container rootfs, network namespaces. Deepest first.
unmount_below "$W" "$RUNDIR"
for n in $(seq 1 "$N"); do
  ip link del "cf-cni$n" 2>/dev/null
  for h in /sys/fs/cgroup/*/cf-node-"$n"; do [[ -d $h ]] && find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null; done
done
# Masquerade rules the CNI bridge plugin left when a sandbox was not torn down through CRI:
# each carries the comment name: "cellfleet-node-N" and jumps to its own CNI-<hash> chain.
iptables-save -t nat | grep -E '^-A POSTROUTING .*name: \\"cellfleet-node-[0-9]+\\"' | sed 's/^-A/-D/' |
  while read -r r; do eval iptables -t nat "$r"; done
for c in $(iptables-save -t nat | grep -oE '^:CNI-[0-9a-f]{24}' | tr -d ':'); do
  iptables -t nat -S POSTROUTING | grep -q -- "-j $c\b" || { iptables -t nat -F "$c"; iptables -t nat -X "$c"; }
done 2>/dev/null
# Chains the kubelets create (kube-proxy --cleanup removes its own).
for ipt in iptables ip6tables; do
  $ipt -D INPUT -j KUBE-FIREWALL 2>/dev/null; $ipt -D OUTPUT -j KUBE-FIREWALL 2>/dev/null
  for t in filter nat mangle; do for c in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT KUBE-PROXY-CANARY; do
    $ipt -t "$t" -F "$c" 2>/dev/null; $ipt -t "$t" -X "$c" 2>/dev/null; done; done
done
# The kubelets' links to container logs (their location is fixed) that point into our state.
find /var/log/containers -maxdepth 1 -type l \( -lname "$W/*" -o -lname "/var/log/pods/*" \) 2>/dev/null |
  while read -r l; do [[ $(readlink "$l") == "$W"/* || ! -e $l ]] && rm -f "$l"; done
rmdir /var/log/containers 2>/dev/null   # the kubelets create it; keep it if anything else uses it
ip link del "$BRIDGE" 2>/dev/null
# The mount points of NODE_PATHS that cluster-up.sh created on the host, if nothing uses them now.
[[ -f $W/created-paths ]] && while read -r d; do rmdir "$d" 2>/dev/null; done < "$W/created-paths"
rm -rf "$W" "$RUNDIR" "$OWNER"
log "cluster down"
