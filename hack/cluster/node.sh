#!/usr/bin/env bash
# node.sh: fault injection on one daemon of the running local cluster, for the e2e suites.
#
#   hack/cluster/node.sh kill  kubelet-3   # SIGKILL it (a node whose kubelet stops)
#   hack/cluster/node.sh start kubelet-3   # start it again with the command cluster-up recorded
#   hack/cluster/node.sh pid   kubelet-3   # print its pid
#
# Names are those of .cluster/pids: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kube-proxy, coredns, provisioner, containerd-N, kubelet-N.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
usage() { echo "usage: node.sh kill|start|pid NAME" >&2; exit 2; }
(($# == 2)) || usage
action=$1 name=$2
[[ $name =~ ^[a-z0-9-]+$ && -x $W/cmd/$name.sh ]] || { echo "node.sh: no daemon named '$name' in $W/cmd" >&2; exit 2; }
pidf=$W/pids/$name.pid
case $action in
  kill)
    [[ -f $pidf ]] || { echo "node.sh: $name is not running" >&2; exit 1; }
    kill -9 "$(cat "$pidf")" 2>/dev/null || true
    rm -f "$pidf" ;;
  start)
    if [[ -f $pidf ]] && kill -0 "$(cat "$pidf")" 2>/dev/null; then echo "node.sh: $name already runs" >&2; exit 1; fi
    nohup setsid "$W/cmd/$name.sh" >> "$W/logs/$name.log" 2>&1 < /dev/null &
    echo $! > "$pidf" ;;
  pid) cat "$pidf" ;;
  *) usage ;;
esac
