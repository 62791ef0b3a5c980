#!/usr/bin/env bash
# envtest-assets.sh builds kube-apiserver and etcd from pinned Go modules (no
# download of prebuilt binaries is possible here) into a cache keyed by their
# versions, and prints the directory to use as KUBEBUILDER_ASSETS.
#
#   hack/envtest-assets.sh            # apiserver + etcd (+ kubectl) for envtest
#   hack/envtest-assets.sh cluster    # also the node and control-plane binaries
#
# Cold it takes ~7 minutes on 2 cores for envtest, ~11 for the cluster set;
# cached, it returns at once. The versions come from the wrapper modules'
# go.mod files, so bumping a pin there invalidates the cache by itself.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
kube_version=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/envtest/kube/go.mod")
etcd_version=$(awk '$1=="require" && $2=="go.etcd.io/etcd/server/v3" {print $3}' "$here/envtest/etcd/go.mod")
out="${CELLFLEET_BIN_CACHE:-$root/bin/k8s}/kube-${kube_version}-etcd-${etcd_version}"
mkdir -p "$out"
# Several test runs may ask at once: one builds, the others wait for it.
exec 9>"$out/.lock"
flock 9

cmds=(kube-apiserver kubectl)
if [[ "${1:-}" == cluster ]]; then
  cmds+=(kube-controller-manager kube-scheduler kubelet kube-proxy)
fi

# One flag set for every Kubernetes build: mixed flag sets share no build cache.
ldflags="$(cat "$here/envtest/kube/ldflags.txt")"
missing=()
for c in "${cmds[@]}"; do [[ -x "$out/$c" ]] || missing+=("k8s.io/kubernetes/cmd/$c"); done
if ((${#missing[@]})); then
  echo "envtest-assets: building ${missing[*]##*/} ${kube_version} (cold: several minutes)" >&2
  (cd "$here/envtest/kube" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 \
    go build -trimpath -ldflags "$ldflags" -o "$out/" "${missing[@]}")
fi
if [[ ! -x "$out/etcd" ]]; then
  echo "envtest-assets: building etcd ${etcd_version}" >&2
  (cd "$here/envtest/etcd" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 \
    go build -trimpath -o "$out/etcd" go.etcd.io/etcd/server/v3)
fi
echo "$out"
