#!/usr/bin/env bash
# deps.sh: prepares a fresh machine for the local cluster; cluster-up.sh runs it first, so
# `make cluster-up`, `make e2e` and CI need nothing installed by hand. Idempotent and quick
# when everything is in place.
#
#   Debian packages  containerd and runc run the nodes' containers (ctr imports images),
#                    containernetworking-plugins gives the bridge/host-local/portmap CNI
#                    plugins, iptables and conntrack serve kube-proxy and the CNI masquerade,
#                    openssl makes the cluster's PKI, iproute2 (ip) the bridges, procps
#                    (sysctl, pgrep) the sysctls and teardown, kmod (modprobe) the modules.
#   kernel           overlay (containerd's snapshotter) and br_netfilter (bridged Pod traffic
#                    must traverse iptables so Services work between Pods of one node): loaded
#                    when they are modules, checked either way.
#   sysctls          net.ipv4.ip_forward=1, net.bridge.bridge-nf-call-iptables=1 (and ip6).
set -euo pipefail
need=()
for p in containerd runc containernetworking-plugins iptables conntrack openssl iproute2 procps kmod; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  echo "cluster deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=120 update -qq
  apt-get -o DPkg::Lock::Timeout=120 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Kernels built with these features have no module to load (this machine kind's kernel has
# them built in and no /lib/modules): modprobe may fail, the checks below decide.
for m in overlay br_netfilter; do modprobe "$m" 2>/dev/null || true; done
grep -qw overlay /proc/filesystems ||
  { echo "cluster deps: the kernel has no overlay filesystem (containerd's snapshotter needs it)" >&2; exit 1; }
[[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] ||
  { echo "cluster deps: the kernel has no br_netfilter (bridged Pod traffic would bypass Services)" >&2; exit 1; }
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
[[ -e /proc/sys/net/bridge/bridge-nf-call-ip6tables ]] && sysctl -qw net.bridge.bridge-nf-call-ip6tables=1
exit 0
