#!/usr/bin/env bash
# images.sh: `make images`. Static binaries (CGO_ENABLED=0) for linux/amd64 and linux/arm64 of
# the manager, the NODE DaemonSet's csi-node and replica-host, the celldsim and storagesim test
# workloads (storagesim: the storage qualification's writer), the Pod
# sandbox (pause) and the CSI sidecars
# (csi-provisioner, csi-resizer, built from their pinned modules in hack/sidecars), each packed by
# hack/mkimage (go-containerregistry, no registry, no base image) into one multi-platform OCI
# archive under bin/images/. celldsim is packed twice (tags 1 and 2, differing only by a label)
# so the e2e suites can roll out a runtime upgrade to a new digest. bin/images/<name>.digest
# holds "REF sha256:DIGEST" (the image index digest) and bin/images/digests all of them;
# cluster-up.sh imports every archive into every node. The sidecar binaries are cached under
# bin/sidecars/<name>-<version> (cold: minutes; the version comes from the wrapper's go.mod).
#
#   hack/cluster/images.sh                  # everything config/overlays/local runs
#   hack/cluster/images.sh pause celldsim   # only these
#   hack/cluster/images.sh csi-provisioner csi-resizer   # the sidecars (make sidecar-images)
#
# The sidecars are in the default set because the storage controller Pod of config/overlays/local
# runs them (its Deployment is not available without them); cold they cost ~17 minutes of CPU for both
# architectures, cached in bin/sidecars afterwards.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${IMAGES:-$root/bin/images}
stage=$root/bin/images-build
mkdir -p "$out" "$stage"
export CGO_ENABLED=0
nonroot=65532:65532
archs=(amd64 arm64)
mkimage=$root/bin/mkimage
(cd "$root/hack/mkimage" && GOWORK=off go build -trimpath -o "$mkimage" .)

# build DIR PKG NAME [ENV=VALUE...]: NAME for every arch into $stage/<arch>/NAME, built in DIR.
build() {
  local dir=$1 pkg=$2 name=$3 arch; shift 3
  for arch in "${archs[@]}"; do
    (cd "$dir" && env "$@" GOOS=linux GOARCH="$arch" go build -trimpath -ldflags=-s -o "$stage/$arch/$name" "$pkg")
  done
}

# binaries DIR NAME: the mkimage --binary flags of DIR/<arch>/NAME.
binaries() {
  local arch
  for arch in "${archs[@]}"; do printf -- '--binary\nlinux/%s=%s/%s/%s\n' "$arch" "$1" "$arch" "$2"; done
}

# sidecar NAME MODULE: the sidecar's binaries from its wrapper module hack/sidecars/NAME (replace
# lines copied from the sidecar's own go.mod), cached by version; prints the cache directory.
sidecar() {
  local name=$1 module=$2 version dir arch
  version=$(awk -v m="$module" '$1=="require" && $2==m {print $3}' "$root/hack/sidecars/$name/go.mod")
  [[ -n $version ]] || { echo "images: no version of $module in hack/sidecars/$name/go.mod" >&2; exit 1; }
  dir=$root/bin/sidecars/$name-$version
  for arch in "${archs[@]}"; do
    [[ -x $dir/$arch/$name ]] && continue
    echo "images: building $name $version for $arch (cold: minutes)" >&2
    (cd "$root/hack/sidecars/$name" && GOWORK=off GOFLAGS=-mod=mod GOOS=linux GOARCH="$arch" \
      go build -trimpath -ldflags "-s -X main.version=$version" -o "$dir/$arch/$name.tmp" "$module/cmd/$name")
    mv "$dir/$arch/$name.tmp" "$dir/$arch/$name"
  done
  echo "$dir $version"
}

wanted=("$@"); ((${#wanted[@]})) || wanted=(manager csi-node replica-host celldsim storagesim pause csi-provisioner csi-resizer)
for name in "${wanted[@]}"; do
  case $name in
    manager)
      build "$root" ./cmd/manager manager
      mapfile -t bins < <(binaries "$stage" manager)
      "$mkimage" --user "$nonroot" "${bins[@]}" localhost/cellfleet/manager:dev "$out/manager.tar" > "$out/manager.digest" ;;
    csi-node | replica-host)
      # Root, not nonroot: csi-node mounts (privileged) and replica-host reads the volumes the
      # local driver created as root; neither image is run unprivileged by a user.
      build "$root" "./cmd/$name" "$name"
      mapfile -t bins < <(binaries "$stage" "$name")
      "$mkimage" "${bins[@]}" "localhost/cellfleet/$name:dev" "$out/$name.tar" > "$out/$name.digest" ;;
    celldsim)
      build "$root" ./test/celldsim celldsim
      mapfile -t bins < <(binaries "$stage" celldsim)
      for v in 1 2; do
        "$mkimage" --user "$nonroot" --label "dev.eric.cellfleet.build=$v" "${bins[@]}" \
          "localhost/cellfleet/celldsim:$v" "$out/celldsim-$v.tar" > "$out/celldsim-$v.digest"
      done ;;
    storagesim)
      build "$root" ./test/storagesim storagesim
      mapfile -t bins < <(binaries "$stage" storagesim)
      "$mkimage" --user "$nonroot" "${bins[@]}" localhost/cellfleet/storagesim:1 "$out/storagesim.tar" > "$out/storagesim.digest" ;;
    pause)
      build "$root/hack/cluster/pause" . pause GOWORK=off
      mapfile -t bins < <(binaries "$stage" pause)
      "$mkimage" "${bins[@]}" localhost/cellfleet/pause:1 "$out/pause.tar" > "$out/pause.digest" ;;
    csi-provisioner | csi-resizer)
      module=github.com/kubernetes-csi/external-provisioner/v6
      [[ $name == csi-resizer ]] && module=github.com/kubernetes-csi/external-resizer/v2
      cached=$(sidecar "$name" "$module"); dir=${cached% *} version=${cached#* }
      mapfile -t bins < <(binaries "$dir" "$name")
      "$mkimage" --user "$nonroot" --label "org.opencontainers.image.version=$version" "${bins[@]}" \
        "localhost/cellfleet/$name:$version" "$out/$name.tar" > "$out/$name.digest" ;;
    *) echo "images: unknown image '$name' (manager, csi-node, replica-host, celldsim, storagesim, pause, csi-provisioner, csi-resizer)" >&2; exit 2 ;;
  esac
done
cat "$out"/*.digest > "$out/digests"
cat "$out/digests"
