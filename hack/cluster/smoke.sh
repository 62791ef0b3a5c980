#!/usr/bin/env bash
# smoke.sh: proves the running local cluster can host the qualification suites, without the
# operator: a 3-member celldsim StatefulSet (required anti-affinity, claims through the local-PV
# provisioner, a budget of maxUnavailable 1) serves writes through its ClusterIP from the host;
# kill -9 of a member process restarts it on its disk; a drain evicts one member and a second
# drain is blocked by the budget; a killed kubelet makes its node NotReady and, restarted, brings
# its member back; every acknowledged record reads back. ~2 minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"; source "$W/bin.env"
K=("$K8S/kubectl" --kubeconfig "$W/admin.kubeconfig")
t() { echo "[$(date +%T)] smoke: $*"; }
image=$(awk '{split($1, r, ":"); print r[1] "@" $2}' "$CLUSTER_ROOT/bin/images/celldsim-1.digest")
ns=smoke
"${K[@]}" create namespace $ns --dry-run=client -o yaml | "${K[@]}" apply -f - >/dev/null
"${K[@]}" -n $ns apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: db-peers}
spec: {clusterIP: None, publishNotReadyAddresses: true, selector: {app: db}, ports: [{name: peer, port: 8081}]}
---
apiVersion: v1
kind: Service
metadata: {name: db}
spec: {selector: {app: db}, ports: [{name: app, port: 8080}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db}
spec: {maxUnavailable: 1, selector: {matchLabels: {app: db}}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db-peers
  replicas: 3
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 10
      securityContext: {runAsNonRoot: true, runAsUser: 65532, fsGroup: 65532}
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {labelSelector: {matchLabels: {app: db}}, topologyKey: kubernetes.io/hostname}
      containers:
      - name: celld
        image: $image
        env:
        - {name: CELLD_NODE, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: CELLD_ADVERTISE, value: "\$(CELLD_NODE).db-peers.$ns.svc:8081"}
        - {name: CELLD_WATCH, value: /work}
        - {name: CELLD_SIM_BOOTSTRAP_MS, value: "5000"}
        ports: [{name: app, containerPort: 8080}, {name: peer, containerPort: 8081}]
        readinessProbe: {httpGet: {path: /.well-known/celld/health, port: 8080}, periodSeconds: 1}
        volumeMounts: [{name: data, mountPath: /work}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
YAML
t "StatefulSet applied"; "${K[@]}" -n $ns rollout status sts/db --timeout=120s >/dev/null; t "3 members Ready"
"${K[@]}" -n $ns get pods -o wide --no-headers | awk '{print "  ", $1, $2, $3, $7}'
ip=$("${K[@]}" -n $ns get svc db -o jsonpath='{.spec.clusterIP}')
acked=()
write() { # write N records through the Service from the host; remember the acknowledged ones
  local i key
  for i in $(seq 1 "$1"); do
    key=smoke-$RANDOM$RANDOM
    if curl -sf -m 5 -X PUT --data "v-$key" "http://$ip:8080/records/$key" >/dev/null; then acked+=("$key"); fi
  done
}
for _ in $(seq 1 50); do curl -sf -m 2 "http://$ip:8080/.well-known/celld/health" >/dev/null && break; sleep 0.2; done
write 20; t "${#acked[@]} writes acknowledged through ClusterIP $ip"

t "kill -9 of db-1's celldsim"
uid=$("${K[@]}" -n $ns get pod db-1 -o jsonpath='{.metadata.uid}')
for p in $(pgrep -x celldsim); do grep -q "pod$uid" /proc/$p/cgroup 2>/dev/null && kill -9 "$p"; done
for _ in $(seq 1 120); do
  [[ $("${K[@]}" -n $ns get pod db-1 -o jsonpath='{.status.containerStatuses[0].restartCount}/{.status.containerStatuses[0].ready}') == 1/true ]] && break; sleep 0.5
done
t "db-1 restarted on its disk: restarts=$("${K[@]}" -n $ns get pod db-1 -o jsonpath='{.status.containerStatuses[0].restartCount}')"
write 10

n2=$("${K[@]}" -n $ns get pod db-2 -o jsonpath='{.spec.nodeName}'); n1=$("${K[@]}" -n $ns get pod db-1 -o jsonpath='{.spec.nodeName}')
t "drain $n2 (the budget allows one member down)"; "${K[@]}" drain "$n2" --ignore-daemonsets --delete-emptydir-data --timeout=60s >/dev/null
t "drain $n1 must be blocked by the budget"
if "${K[@]}" drain "$n1" --ignore-daemonsets --timeout=10s >/dev/null 2>&1; then echo "smoke: FAIL: second drain was not blocked" >&2; exit 1; fi
"${K[@]}" uncordon "$n1" "$n2" >/dev/null; "${K[@]}" -n $ns rollout status sts/db --timeout=120s >/dev/null; t "recovered after uncordon"
write 10

t "kill -9 of kubelet-3 (node failure; containers keep running)"
"$here/node.sh" kill kubelet-3
for _ in $(seq 1 120); do [[ $("${K[@]}" get node node-3 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') != True ]] && break; sleep 1; done
t "node-3 Ready=$("${K[@]}" get node node-3 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')"
write 10
"$here/node.sh" start kubelet-3
for _ in $(seq 1 120); do [[ $("${K[@]}" get node node-3 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]] && break; sleep 1; done
"${K[@]}" -n $ns rollout status sts/db --timeout=120s >/dev/null; t "node-3 back"
write 10

lost=0
for key in "${acked[@]}"; do
  got=$(curl -sf -m 5 "http://$ip:8080/records/$key" || true)
  [[ $got == "v-$key" ]] || { echo "smoke: LOST acknowledged record $key (read '$got')" >&2; lost=$((lost + 1)); }
done
"${K[@]}" delete namespace $ns --wait=false >/dev/null
((lost == 0)) || { echo "smoke: FAIL: $lost of ${#acked[@]} acknowledged records lost" >&2; exit 1; }
t "SMOKE OK: ${#acked[@]} acknowledged records all read back"
