#!/usr/bin/env bash
# deps.sh: installs the Debian packages the local cluster needs when any is missing.
# containerd and runc run the nodes' containers, containernetworking-plugins gives the
# bridge/host-local/portmap CNI plugins, iptables and conntrack serve kube-proxy.
set -euo pipefail
need=()
for p in containerd runc containernetworking-plugins iptables conntrack openssl; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  echo "cluster deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
