#!/usr/bin/env bash
# images.sh: `make images`. Static binaries (CGO_ENABLED=0) of the manager, the celldsim test
# workload and the Pod sandbox (pause), each packed by hack/mkimage.sh into an OCI archive under
# bin/images/. celldsim is packed twice (tags 1 and 2, differing only by a label) so the e2e
# suites can roll out a runtime upgrade to a new digest. bin/images/digests lists
# "REF sha256:DIGEST" per image; cluster-up.sh imports every archive into every node.
#
#   hack/cluster/images.sh                  # all of them
#   hack/cluster/images.sh pause celldsim   # only these
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${IMAGES:-$root/bin/images}
stage=$root/bin/images-build
mkdir -p "$out" "$stage"
export CGO_ENABLED=0
nonroot=65532:65532
wanted=("$@"); ((${#wanted[@]})) || wanted=(manager celldsim pause)
for name in "${wanted[@]}"; do
  case $name in
    manager)
      (cd "$root" && go build -trimpath -ldflags=-s -o "$stage/manager" ./cmd/manager)
      "$root/hack/mkimage.sh" --user "$nonroot" localhost/cellfleet/manager:dev "$out/manager.tar" "$stage/manager" > "$out/manager.digest" ;;
    celldsim)
      (cd "$root" && go build -trimpath -ldflags=-s -o "$stage/celldsim" ./test/celldsim)
      for v in 1 2; do
        "$root/hack/mkimage.sh" --user "$nonroot" --label "dev.eric.cellfleet.build=$v" \
          "localhost/cellfleet/celldsim:$v" "$out/celldsim-$v.tar" "$stage/celldsim" > "$out/celldsim-$v.digest"
      done ;;
    pause)
      (cd "$root/hack/cluster/pause" && GOWORK=off go build -trimpath -ldflags=-s -o "$stage/pause" .)
      "$root/hack/mkimage.sh" localhost/cellfleet/pause:1 "$out/pause.tar" "$stage/pause" > "$out/pause.digest" ;;
    *) echo "images: unknown image '$name' (manager, celldsim, pause)" >&2; exit 2 ;;
  esac
done
cat "$out"/*.digest > "$out/digests"
cat "$out/digests"
