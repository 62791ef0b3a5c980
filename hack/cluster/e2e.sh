#!/usr/bin/env bash
# e2e.sh: `make e2e`. Builds the images, brings the local cluster up, deploys the manager's two
# Deployments (the fleet manager and the storage controller) from config/overlays/local, runs the qualification suites of test/e2e under write load, writes the
# summary (docs/qualification.md unless E2E_SUMMARY says otherwise) and prints it, and tears the
# cluster down, also when a step or a scenario fails. Exits non-zero when any scenario fails.
#
#   E2E_RUN=REGEXP     run only the matching suites (go test -run), e.g. E2E_RUN='Rolling|Bucket'
#   E2E_SUMMARY=FILE   write the summary there instead (CI keeps docs/qualification.md, the
#                      full run's record, untouched)
#   KEEP_CLUSTER=1     leave the cluster up afterwards (make cluster-down removes it)
#   SKIP_SMOKE=1       skip hack/cluster/smoke.sh (the cluster's own check, ~50 s)
#   E2E_LOCK_WAIT=S    how long to wait for another e2e run on this machine to finish (3600)
#   E2E_KUBECONFIG=F   run on the existing cluster of kubeconfig F instead: no local cluster is
#                      brought up or torn down, the images must already be on its nodes (or in
#                      its registry; docs/local-cluster.md, "Another cluster"), the summary goes
#                      to bin/e2e-existing/summary.md, and the suites that need the local
#                      cluster's own powers skip, saying which. E2E_MANAGER= (empty) skips
#                      deploying the manager (both Deployments already run); E2E_KUBECTL, E2E_AUDIT_LOG
#                      and E2E_CELLDSIM_IMAGE_1/_2 are read by the suites (test/e2e).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
root=$CLUSTER_ROOT
# One local cluster per machine (env.sh): hold LOCK for the whole run, so a second e2e waits for
# the first (E2E_LOCK_WAIT seconds, default an hour). flock -o: the cluster's daemons do not
# inherit the lock, so a cluster kept up (KEEP_CLUSTER=1) does not hold it.
if [[ -z ${E2E_KUBECONFIG:-} && -z ${CF_E2E_LOCKED:-} ]]; then
  flock -n "$LOCK" true || echo "e2e: another e2e run holds $LOCK; waiting up to ${E2E_LOCK_WAIT:-3600}s"
  exec env CF_E2E_LOCKED=1 flock -o -w "${E2E_LOCK_WAIT:-3600}" -E 75 "$LOCK" "$0" "$@"
fi

"$here/images.sh"   # the archives, and the digests the suites pin celldsim by
if [[ -n ${E2E_KUBECONFIG:-} ]]; then
  W=$root/bin/e2e-existing
  mkdir -p "$W/logs"
  summary=${E2E_SUMMARY:-$W/summary.md}
else
  summary=${E2E_SUMMARY:-$root/docs/qualification.md}
  cleanup() { [[ -n ${KEEP_CLUSTER:-} ]] || "$here/cluster-down.sh"; }
  trap cleanup EXIT
  "$here/cluster-up.sh"
  [[ -n ${SKIP_SMOKE:-} ]] || "$here/smoke.sh"   # the cluster itself works before the operator is judged on it
fi
manager=${E2E_MANAGER-$W/manager.yaml}
if [[ $manager == "$W/manager.yaml" ]]; then
  make -s -C "$root" "$root/bin/kustomize" >/dev/null
  "$root/bin/kustomize" build "$root/config/overlays/local" > "$manager"
fi

args=(-count=1 -timeout=150m -v)
[[ -n ${E2E_RUN:-} ]] && args+=(-run "$E2E_RUN")
mkdir -p "$(dirname "$summary")"
rm -f "$summary.new"
rc=0
(cd "$root/test/e2e" && E2E=1 E2E_MANAGER="$manager" E2E_SUMMARY="$summary.new" \
  go test "${args[@]}" .) 2>&1 | tee "$W/logs/e2e.log" || rc=$?
grep -E '^(--- |=== RUN|ok|FAIL|PASS)' "$W/logs/e2e.log" | grep -v '=== RUN' || true
# The summary replaces the previous one only when the suites wrote it (not after a build failure).
if [[ -f $summary.new ]]; then
  mv "$summary.new" "$summary"
  printf '\nsummary (%s):\n' "$summary"; cat "$summary"
fi
exit "$rc"
