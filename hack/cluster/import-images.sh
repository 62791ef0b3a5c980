#!/usr/bin/env bash
# import-images.sh: imports every OCI archive of bin/images (make images) into the containerd of
# every node of the running local cluster, and tags each image also by REPO@DIGEST: containerd's
# CRI resolves a digest-pinned image (as a CelldFleet's runtimeImage must be) only by that name,
# and there is no registry to pull it from. cluster-up.sh runs it; run it again after
# `make images` to refresh a running cluster.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
IMAGES=${IMAGES:-$CLUSTER_ROOT/bin/images}
shopt -s nullglob
archives=("$IMAGES"/*.tar)
((${#archives[@]})) || { echo "import-images: no archives in $IMAGES: run make images" >&2; exit 1; }
# import_node SOCKET: every archive into one node's containerd.
import_node() {
  local sock=$1 a d ref digest
  for a in "${archives[@]}"; do
    ctr -a "$sock" -n k8s.io images import "$a" >/dev/null
    d=${a%.tar}.digest
    [[ -f $d ]] || continue
    read -r ref digest < "$d"
    ctr -a "$sock" -n k8s.io images rm "${ref%:*}@$digest" >/dev/null 2>&1 || true
    ctr -a "$sock" -n k8s.io images tag "$ref" "${ref%:*}@$digest" >/dev/null
  done
}
pids=()
for sock in "$RUNDIR"/ctrd-*/containerd.sock; do import_node "$sock" & pids+=($!); done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit "$rc"
