#!/usr/bin/env bash
# cluster-up.sh: a real multi-node Kubernetes cluster on this one machine, from binaries
# the project builds itself (kind cannot run here: its node image only comes from a registry).
#
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, CoreDNS and a
#   local-PV provisioner run as host processes; each of the NODES nodes is its own containerd
#   (own socket, root, runc root, cgroup root, CNI bridge and subnet) plus its own kubelet,
#   labelled topology.kubernetes.io/zone=zone-a, zone-b, ... Images are the OCI tarballs in
#   bin/images (make images), imported into every node with ctr: no registry.
#
# State, logs, pids and kubeconfigs live under .cluster/ (CLUSTER_DIR); KUBECONFIG is
# .cluster/admin.kubeconfig. A failed bring-up tears down what it started (KEEP_FAILED=1 keeps
# it for debugging; cluster-down.sh removes it either way). See docs/local-cluster.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
IMAGES=${IMAGES:-$CLUSTER_ROOT/bin/images}
log() { echo "[$(date +%T)] cluster-up: $*"; }

[[ $(id -u) == 0 ]] || { echo "cluster-up: needs root (containerd, kubelet, bridges, iptables)" >&2; exit 1; }
[[ -f $IMAGES/pause.tar ]] || { echo "cluster-up: $IMAGES/pause.tar missing: run 'make images' first" >&2; exit 1; }
other=$(other_owner)
[[ -z $other ]] || { echo "cluster-up: the local cluster of $other runs on this machine (it shares $RUNDIR, the $BRIDGE bridge, the node addresses and cgroups): remove it first with CLUSTER_DIR=$other $here/cluster-down.sh" >&2; exit 1; }
if [[ -d $W ]]; then log "removing the previous cluster first"; "$here/cluster-down.sh"; fi
mkdir -p "$RUNDIR" && echo "$W" > "$OWNER"

"$here/deps.sh"
eval "$("$here/build.sh")"
mkdir -p "$W/pki" "$W/logs" "$W/pids" "$W/cmd" "$RUNDIR"
# The nodes' own paths (NODE_PATHS) need a mount point on the host; cluster-down.sh removes those
# this bring-up created (listed in $W/created-paths) when they are empty again.
for p in "${NODE_PATHS[@]}"; do
  [[ -d ${p#*:} ]] || { mkdir -p "${p#*:}"; echo "${p#*:}" >> "$W/created-paths"; }
done
printf 'K8S=%q\nCRICTL=%q\n' "$K8S" "$CRICTL" > "$W/bin.env"   # for cluster-down.sh and node.sh

failed() {
  local rc=$?
  echo "cluster-up: failed (exit $rc); last lines of each log:" >&2
  for f in "$W"/logs/*.log; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 5 "$f" >&2; }; done
  if [[ -z ${KEEP_FAILED:-} ]]; then "$here/cluster-down.sh" >&2; fi
  exit "$rc"
}
trap failed ERR

# start NAME CMD...: records the command as $W/cmd/NAME.sh (node.sh restarts it from there) and
# runs it detached with its output in $W/logs/NAME.log and its pid in $W/pids/NAME.pid.
start() {
  local name=$1; shift
  { echo '#!/usr/bin/env bash'; printf 'exec'; printf ' %q' "$@"; echo; } > "$W/cmd/$name.sh"
  chmod +x "$W/cmd/$name.sh"
  nohup setsid "$W/cmd/$name.sh" >> "$W/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$W/pids/$name.pid"
}
# wait_for WHAT SECONDS CMD...: polls CMD every 0.2 s until it succeeds or the deadline passes.
wait_for() {
  local what=$1 deadline=$((SECONDS + $2)); shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "cluster-up: timed out waiting for $what" >&2; return 1; }
    sleep 0.2
  done
}

# --- host networking ---------------------------------------------------------------------------
ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
ip addr replace "$HOSTIP/24" dev "$BRIDGE"; ip link set "$BRIDGE" up
for n in $(seq 1 "$NODES"); do ip addr replace "$(node_ip "$n")/24" dev "$BRIDGE"; done
# deps.sh set ip_forward and bridge-nf-call-iptables (and loaded br_netfilter where it is a module).
iptables -P FORWARD ACCEPT   # Docker, if it ever ran here, leaves DROP

# --- PKI and credentials -------------------------------------------------------------------------
P=$W/pki
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$P/ca.key" -out "$P/ca.crt" -days 3650 -subj /CN=cellfleet-local-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$P/apiserver.key" -out "$P/apiserver.csr" -subj /CN=kube-apiserver 2>/dev/null
echo "subjectAltName=IP:127.0.0.1,IP:$HOSTIP,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" > "$P/san.ext"
openssl x509 -req -in "$P/apiserver.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -out "$P/apiserver.crt" -days 3650 -extfile "$P/san.ext" 2>/dev/null
openssl genrsa -out "$P/sa.key" 2048 2>/dev/null; openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null
echo "admin-$(openssl rand -hex 16),admin,admin,system:masters" > "$P/tokens.csv"
for n in $(seq 1 "$NODES"); do echo "node-$n-$(openssl rand -hex 16),system:node:node-$n,node-$n,system:nodes" >> "$P/tokens.csv"; done
chmod 600 "$P"/*.key "$P/tokens.csv"
kubeconfig() { # FILE TOKEN
  cat > "$1" <<EOK
apiVersion: v1
kind: Config
clusters: [{name: cellfleet-local, cluster: {server: "https://$HOSTIP:6443", certificate-authority: $P/ca.crt}}]
users: [{name: u, user: {token: "$2"}}]
contexts: [{name: cellfleet-local, context: {cluster: cellfleet-local, user: u}}]
current-context: cellfleet-local
EOK
}
kubeconfig "$W/admin.kubeconfig" "$(grep ',admin,' "$P/tokens.csv" | cut -d, -f1)"
K=("$K8S/kubectl" --kubeconfig "$W/admin.kubeconfig")

# Audit: every delete of a Pod, claim, volume, workload, Service, budget, fleet, reservation,
# replicated volume or volume replica, so the e2e suites can prove which deletions the operator
# (its ServiceAccount) issued.
cat > "$W/audit-policy.yaml" <<EOA
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [delete, deletecollection]
  resources:
  - {group: "", resources: [pods, persistentvolumeclaims, persistentvolumes, services]}
  - {group: apps, resources: [statefulsets, deployments]}
  - {group: policy, resources: [poddisruptionbudgets]}
  - {group: celld.eric.dev, resources: [celldfleets, celldstoragereservations]}
  - {group: storage.eric.dev, resources: [replicatedvolumes, volumereplicas]}
# Who changes a claim, and when: the replacement handoff deletes a claim only at
# the resourceVersion it recorded, so every writer of claims is worth seeing.
- level: Metadata
  verbs: [update, patch]
  resources:
  - {group: "", resources: [persistentvolumeclaims, persistentvolumeclaims/status]}
- level: None
EOA

# --- control plane --------------------------------------------------------------------------------
log "etcd"
start etcd "$K8S/etcd" --data-dir "$W/etcd" --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 --unsafe-no-fsync
log "kube-apiserver"
start kube-apiserver "$K8S/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 --cert-dir="$W/apiserver-certs" \
  --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" --client-ca-file="$P/ca.crt" \
  --secure-port=6443 --bind-address=0.0.0.0 --advertise-address=$HOSTIP --token-auth-file="$P/tokens.csv" \
  --authorization-mode=Node,RBAC --service-account-issuer=https://kubernetes.default.svc \
  --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
  --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true --kubelet-preferred-address-types=InternalIP \
  --default-not-ready-toleration-seconds=30 --default-unreachable-toleration-seconds=30 \
  --audit-policy-file="$W/audit-policy.yaml" --audit-log-path="$W/logs/audit.log" --audit-log-format=json \
  --audit-log-mode=blocking --v=1
wait_for "kube-apiserver /readyz" 90 "${K[@]}" get --raw /readyz
log "controllers"
start kube-controller-manager "$K8S/kube-controller-manager" --kubeconfig="$W/admin.kubeconfig" \
  --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" --use-service-account-credentials=true \
  --controllers='*' --leader-elect=false --bind-address=127.0.0.1 --secure-port=10257 \
  --node-monitor-grace-period=20s --v=1
start kube-scheduler "$K8S/kube-scheduler" --kubeconfig="$W/admin.kubeconfig" --leader-elect=false \
  --bind-address=127.0.0.1 --secure-port=10259 --v=1
# One kube-proxy serves every node: they all share the host's network namespace.
start kube-proxy "$K8S/kube-proxy" --kubeconfig="$W/admin.kubeconfig" --hostname-override=node-1 \
  --cluster-cidr=10.244.0.0/16 --proxy-mode=iptables --metrics-bind-address=127.0.0.1:10249 \
  --healthz-bind-address=127.0.0.1:10256 --v=1
cat > "$W/Corefile" <<EOC
.:53 {
    bind $HOSTIP
    errors
    health 127.0.0.1:10280
    ready 127.0.0.1:10281
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $W/admin.kubeconfig cellfleet-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 5
}
EOC
start coredns "$COREDNS" -conf "$W/Corefile"
start provisioner "$PROVISIONER" --kubeconfig="$W/admin.kubeconfig" --base="$W/nodes"
wait_for "default ServiceAccount" 60 "${K[@]}" get serviceaccount default
"${K[@]}" apply -f - >/dev/null <<EOS
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: standard, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: cellfleet.local/hostpath
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
EOS

# --- nodes -----------------------------------------------------------------------------------------
containerd config default > "$W/containerd-default.toml"
for n in $(seq 1 "$NODES"); do
  D=$(node_dir "$n"); S=$(node_sock "$n"); zone=$(node_zone "$n")
  log "node-$n ($zone, $(node_ip "$n"))"
  # Each kubelet owns its Pod log directory: a shared /var/log/pods would be garbage-collected by
  # the other kubelets, which do not know the Pods in it.
  mkdir -p "$D/cni" "$D/manifests" "$D/pv" "$D/pod-logs"
  # cgroup v1: the kubelet's cgroupRoot must exist in every hierarchy; cpuset also needs cpus and mems.
  for h in /sys/fs/cgroup/*/; do [[ $h == */unified/ ]] || mkdir -p "$h/cf-node-$n"; done
  if [[ -d /sys/fs/cgroup/cpuset ]]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus > "/sys/fs/cgroup/cpuset/cf-node-$n/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems > "/sys/fs/cgroup/cpuset/cf-node-$n/cpuset.mems"
  fi
  # Lowering oom_score_adj needs CAP_SYS_RESOURCE, which this machine lacks: restrict it or runc
  # fails every sandbox. Network namespaces live under the node's state dir so teardown finds them.
  sed -e "s#^root = .*#root = \"$D/containerd\"#" -e "s#^state = .*#state = \"$RUNDIR/ctrd-$n\"#" \
      -e "s#address = \"/run/containerd/containerd.sock\"#address = \"$S\"#" \
      -e "s#sandbox_image = .*#sandbox_image = \"localhost/cellfleet/pause:1\"#" \
      -e "s#bin_dir = .*#bin_dir = \"/usr/lib/cni\"#" -e "s#conf_dir = \"/etc/cni/net.d\"#conf_dir = \"$D/cni\"#" \
      -e "s#restrict_oom_score_adj = false#restrict_oom_score_adj = true#" \
      -e "s#netns_mounts_under_state_dir = false#netns_mounts_under_state_dir = true#" \
      -e "s#^            Root = \"\"#            Root = \"$RUNDIR/ctrd-$n/runc\"#" \
      "$W/containerd-default.toml" > "$D/containerd.toml"
  cat > "$D/cni/10-cellfleet.conflist" <<EOC
{"cniVersion":"0.4.0","name":"cellfleet-node-$n","plugins":[
 {"type":"bridge","bridge":"cf-cni$n","isGateway":true,"ipMasq":true,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.$n.0/24","gateway":"10.244.$n.1"}]],
          "routes":[{"dst":"0.0.0.0/0"}],"dataDir":"$D/cni-ipam"}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}
EOC
  kubeconfig "$D/kubelet.kubeconfig" "$(grep ",system:node:node-$n," "$P/tokens.csv" | cut -d, -f1)"
  cat > "$D/kubelet.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $(node_ip "$n")
port: $((10300 + n))
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((10400 + n))
cgroupDriver: cgroupfs
cgroupRoot: /cf-node-$n
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$S
staticPodPath: $D/manifests
podLogsDir: $D/pod-logs
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
clusterDNS: ["$HOSTIP"]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: "100Mi", nodefs.available: "2%", imagefs.available: "2%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOC
  # The node's own mount namespace (node-ns.sh): containerd resolves the DaemonSet's hostPaths and
  # the kubelet mounts volumes there, on the node's own /var/lib/kubelet, /var/lib/cellfleet and
  # /run/cellfleet. Both enter it through the holder's pid (node.sh restarts them the same way).
  start "ns-$n" unshare --mount --propagation slave -- "$here/node-ns.sh" "$n"
  wait_for "mount namespace of node-$n" 10 test -f "$D/ns-ready"
  ns=(nsenter "--mount=/proc/$(cat "$W/pids/ns-$n.pid")/ns/mnt" --)
  start "containerd-$n" "${ns[@]}" containerd --config "$D/containerd.toml"
  wait_for "containerd of node-$n" 20 test -S "$S"
  start "kubelet-$n" "${ns[@]}" "$K8S/kubelet" --config="$D/kubelet.yaml" --kubeconfig="$D/kubelet.kubeconfig" \
    --root-dir=/var/lib/kubelet --hostname-override="node-$n" --node-ip="$(node_ip "$n")" \
    --node-labels="topology.kubernetes.io/zone=$zone,topology.kubernetes.io/region=local" --v=1
done
log "importing images"
IMAGES=$IMAGES "$here/import-images.sh"
nodes_ready() { [[ $("${K[@]}" get nodes --no-headers 2>/dev/null | grep -c ' Ready ') == "$NODES" ]]; }
log "waiting for $NODES nodes"
wait_for "$NODES Ready nodes" 120 nodes_ready
for n in $(seq 1 "$NODES"); do  # spec.podCIDR must match the node's CNI range
  "${K[@]}" patch node "node-$n" --type=merge -p "{\"spec\":{\"podCIDR\":\"10.244.$n.0/24\",\"podCIDRs\":[\"10.244.$n.0/24\"]}}" >/dev/null
done
"${K[@]}" get nodes -L topology.kubernetes.io/zone
log "cluster up in ${SECONDS}s; export KUBECONFIG=$W/admin.kubeconfig"
