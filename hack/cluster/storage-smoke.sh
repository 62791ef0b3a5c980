#!/usr/bin/env bash
# storage-smoke.sh: the first storage check on the running local cluster (bring it up with
# CLUSTER_NODES=4 and the product of config/overlays/local applied, e.g. KEEP_CLUSTER=1 make e2e
# or the commands in docs/local-cluster.md, "Storage bring-up"). Not yet the storage
# qualification of issue 13 (test/e2e has no storage scenario yet): a PVC of cellfleet-replicated
# mounted in a Pod (a real FUSE mount of a 3-replica volume), timed from the claim to the Ready
# Pod; writes through the Pod while the replica-host process of the volume's coordinator is
# killed with -9; every acknowledged write read back through the volume.
#
# The workload is celldsim (test/celldsim) with no peers (CELLD_SIM_PEER_COPIES=0): it
# acknowledges a write only after appending and fsyncing it to its log on /work, the replicated
# volume, so an acknowledged write that reads back proves the volume kept it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"; source "$W/bin.env"
K=("$K8S/kubectl" --kubeconfig "$W/admin.kubeconfig")
t() { echo "[$(date +%T)] storage-smoke: $*"; }
WRITES=${WRITES:-600}
image=$(awk '{split($1, r, ":"); print r[1] "@" $2}' "$CLUSTER_ROOT/bin/images/celldsim-1.digest")
ns=storage-smoke
"${K[@]}" create namespace $ns --dry-run=client -o yaml | "${K[@]}" apply -f - >/dev/null
start=$(date +%s%N)
"${K[@]}" -n $ns apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: cellfleet-replicated
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65532, fsGroup: 65532}
  containers:
  - name: celld
    image: $image
    env:
    - {name: CELLD_WATCH, value: /work}
    - {name: CELLD_SIM_PEERS, value: "127.0.0.1:1"}   # named but never needed: 0 peer copies
    - {name: CELLD_SIM_PEER_COPIES, value: "0"}
    - {name: CELLD_SIM_BOOTSTRAP_MS, value: "0"}
    readinessProbe: {httpGet: {path: /.well-known/celld/health, port: 8080}, periodSeconds: 1}
    volumeMounts: [{name: data, mountPath: /work}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
YAML
"${K[@]}" -n $ns wait --for=condition=Ready pod/writer --timeout=180s >/dev/null
t "claim to Ready Pod in $(( ($(date +%s%N) - start) / 1000000 )) ms"
ip=$("${K[@]}" -n $ns get pod writer -o jsonpath='{.status.podIP}')
uid=$("${K[@]}" -n $ns get pod writer -o jsonpath='{.metadata.uid}')
vol=$("${K[@]}" -n $ns get pvc data -o jsonpath='{.spec.volumeName}')
for p in $(pgrep -x celldsim); do
  grep -q "pod$uid" "/proc/$p/cgroup" 2>/dev/null && grep ' /work ' "/proc/$p/mountinfo" | grep -q fuse.cellfleet &&
    t "/work in the Pod is the FUSE mount of $vol"
done
"${K[@]}" -n cellfleet-storage get volumereplicas --no-headers | grep "^$vol-" | awk '{print "  ", $1, $3, $5}'

ledger=$W/storage-smoke.ledger; : > "$ledger"   # outside the volume
( for i in $(seq 1 "$WRITES"); do
    curl -sf -m 3 -X PUT --data "v-$i" "http://$ip:8080/records/k$i" >/dev/null && echo "k$i" >> "$ledger"
    sleep 0.05
  done ) & writer=$!
sleep 3
coord=$("${K[@]}" get replicatedvolume "$vol" -o jsonpath='{.status.coordinator}')
node=$("${K[@]}" -n cellfleet-storage get volumereplica "$coord" -o jsonpath='{.spec.node}')
nuid=$("${K[@]}" -n cellfleet-storage get pods --field-selector "spec.nodeName=$node" -o jsonpath='{.items[0].metadata.uid}')
killed=0
for p in $(pgrep -x replica-host); do
  grep -q "pod$nuid" "/proc/$p/cgroup" 2>/dev/null && { kill -9 "$p"; killed=1; }
done
((killed)) || { echo "storage-smoke: no replica-host process in the NODE Pod of $node" >&2; exit 1; }
t "kill -9 of the replica-host holding the coordinator $coord (node $node)"
wait "$writer"
t "$(wc -l < "$ledger") of $WRITES writes acknowledged; new coordinator $("${K[@]}" get replicatedvolume "$vol" -o jsonpath='{.status.coordinator}')"
lost=0
while read -r k; do
  [[ $(curl -sf -m 5 "http://$ip:8080/records/$k") == "v-${k#k}" ]] || { lost=$((lost + 1)); echo "  lost $k"; }
done < "$ledger"
t "$(( $(wc -l < "$ledger") - lost )) of $(wc -l < "$ledger") acknowledged writes read back through the volume"
"${K[@]}" delete namespace $ns --wait=false >/dev/null
((lost == 0)) || { echo "storage-smoke: $lost acknowledged writes lost" >&2; exit 1; }
