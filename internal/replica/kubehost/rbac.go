package kubehost

// RBAC of the replica host, least privilege, all in the storage namespace
// (cellfleet-storage):
//   - VolumeReplicas: read and watch (the cache holds only its node's, by
//     label), and their status, which the host alone writes;
//   - Secrets: none. The host creates tokens of ServiceAccounts
//     (serviceaccounts/token), which the token-exchange admission policy
//     narrows to its own node's cellfleet-node-<node>; that ServiceAccount
//     reads exactly the Secrets of the node's replicas (exchange.go,
//     docs/decisions/0007-per-node-credentials.md);
//   - backing claims: get, and update to add the backing-use finalizer;
//   - PersistentVolumes (cluster-scoped, so a ClusterRole): get only, the
//     bound PV's CSI volume handle and attributes the host hands the local
//     driver's NodePublishVolume;
//   - EndpointSlices: the host's own (managed-by label), which it creates,
//     updates and deletes (UID precondition), and reads its peers' to dial
//     them;
//   - Leases: its node's heartbeat (lease.go), get, create and update; no
//     list or watch, no delete. RBAC cannot say "its node's" for a create,
//     so the node-write admission policy does
//     (config/node/node-write-policy.yaml).

// +kubebuilder:rbac:groups=storage.eric.dev,namespace=cellfleet-storage,resources=volumereplicas,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.eric.dev,namespace=cellfleet-storage,resources=volumereplicas/status,verbs=get;update
// +kubebuilder:rbac:groups="",namespace=cellfleet-storage,resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups="",namespace=cellfleet-storage,resources=persistentvolumeclaims,verbs=get;update
// +kubebuilder:rbac:groups=discovery.k8s.io,namespace=cellfleet-storage,resources=endpointslices,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=cellfleet-storage,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get
