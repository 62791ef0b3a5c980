#!/usr/bin/env bash
# e2e.sh: `make e2e`. Builds the images, brings the local cluster up, deploys the manager from
# config/overlays/local, runs the qualification suites of test/e2e under write load, writes the
# summary to docs/qualification.md, and tears the cluster down (also when a step fails).
#
#   E2E_RUN=REGEXP   run only the matching suites (go test -run), e.g. E2E_RUN='Rolling|Bucket'
#   KEEP_CLUSTER=1   leave the cluster up afterwards (make cluster-down removes it)
#   SKIP_SMOKE=1     skip hack/cluster/smoke.sh (the cluster's own check, ~50 s)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
root=$CLUSTER_ROOT
cleanup() { [[ -n ${KEEP_CLUSTER:-} ]] || "$here/cluster-down.sh"; }
trap cleanup EXIT

"$here/images.sh"
"$here/cluster-up.sh"
[[ -n ${SKIP_SMOKE:-} ]] || "$here/smoke.sh"   # the cluster itself works before the operator is judged on it
make -s -C "$root" "$root/bin/kustomize" >/dev/null
"$root/bin/kustomize" build "$root/config/overlays/local" > "$W/manager.yaml"

args=(-count=1 -timeout=150m -v)
[[ -n ${E2E_RUN:-} ]] && args+=(-run "$E2E_RUN")
rc=0
(cd "$root/test/e2e" && E2E=1 E2E_MANAGER="$W/manager.yaml" E2E_SUMMARY="$root/docs/qualification.md" \
  go test "${args[@]}" .) 2>&1 | tee "$W/logs/e2e.log" || rc=$?
grep -E '^(--- |=== RUN|ok|FAIL|PASS)' "$W/logs/e2e.log" | grep -v '=== RUN' || true
exit "$rc"
