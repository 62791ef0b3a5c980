package kubehost

// RBAC of the replica host, least privilege, all in the storage namespace
// (cellfleet-storage):
//   - VolumeReplicas: read and watch (the cache holds only its node's, by
//     label), and their status, which the host alone writes;
//   - Secrets: get only (no list or watch), so the host reads the Secrets of
//     its own replicas by name and never holds the namespace's Secrets;
//   - backing claims: get, and update to add the backing-use finalizer;
//   - PersistentVolumes (cluster-scoped, so a ClusterRole): get only, the
//     bound PV's CSI volume handle and attributes the host hands the local
//     driver's NodePublishVolume;
//   - EndpointSlices: the host's own (managed-by label), which it creates,
//     updates and deletes (UID precondition), and reads its peers' to dial
//     them.

// +kubebuilder:rbac:groups=storage.eric.dev,namespace=cellfleet-storage,resources=volumereplicas,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.eric.dev,namespace=cellfleet-storage,resources=volumereplicas/status,verbs=get;update
// +kubebuilder:rbac:groups="",namespace=cellfleet-storage,resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",namespace=cellfleet-storage,resources=persistentvolumeclaims,verbs=get;update
// +kubebuilder:rbac:groups=discovery.k8s.io,namespace=cellfleet-storage,resources=endpointslices,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get
