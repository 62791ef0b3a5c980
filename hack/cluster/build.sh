#!/usr/bin/env bash
# build.sh: builds everything the local cluster runs from pinned Go modules into
# caches under bin/ keyed by version, and prints shell assignments naming them:
#
#   eval "$(hack/cluster/build.sh)"   # K8S COREDNS PROVISIONER CRICTL
#
# The Kubernetes binaries and etcd come from hack/envtest-assets.sh (argument
# `cluster`); CoreDNS, the local-PV provisioner and crictl from the wrapper
# modules beside this script (each its own go.mod, built with GOWORK=off).
# Cold: ~11 minutes on 2 cores for Kubernetes, ~3.5 for the rest; cached: instant.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${CELLFLEET_BIN_CACHE:-$root/bin}/cluster

# version of module $2 pinned in wrapper $1's go.mod (the provisioner is local code: hash it too)
pin() { awk -v m="$2" '$1==m {print $2} $1=="require" && $2==m {print $3}' "$here/$1/go.mod" | head -1; }

# build NAME PKG VERSION: go build PKG in the wrapper module NAME into $cache/NAME-VERSION/NAME
build() {
  local name=$1 pkg=$2 version=$3 out="$cache/$1-$3"
  mkdir -p "$out"
  exec 9>"$out/.lock"; flock 9
  if [[ ! -x "$out/$name" ]]; then
    echo "cluster build: $name $version" >&2
    (cd "$here/$name" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$out/$name.tmp" "$pkg")
    mv "$out/$name.tmp" "$out/$name"
  fi
  exec 9>&-
  echo "$out/$name"
}

k8s=$("$root/hack/envtest-assets.sh" cluster)
coredns=$(build coredns . "$(pin coredns github.com/coredns/coredns)")
prov_src=$(cat "$here/provisioner/main.go" "$here/provisioner/go.mod" | sha256sum | cut -c1-12)
provisioner=$(build provisioner . "$(pin provisioner sigs.k8s.io/sig-storage-lib-external-provisioner/v13)-$prov_src")
crictl=$(build crictl sigs.k8s.io/cri-tools/cmd/crictl "$(pin crictl sigs.k8s.io/cri-tools)")
printf 'K8S=%q\nCOREDNS=%q\nPROVISIONER=%q\nCRICTL=%q\n' "$k8s" "$coredns" "$provisioner" "$crictl"
