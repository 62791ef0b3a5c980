package volume

// RBAC of the volume controller, least privilege:
//   - cluster-wide: the ReplicatedVolume API (no create: the CSI controller
//     creates volumes; delete, bound to a UID, only for an orphaned volume,
//     orphan.go), Node reads for placement and for judging a replica's node
//     gone, PersistentVolume get and list (a replica's backing volume gone;
//     whether a PV holds an orphan candidate), and claim get (no list or
//     watch) for the source claim of a volume;
//   - in the storage namespace (cellfleet-storage): VolumeReplicas, backing
//     claims and replica Services it creates, updates and deletes (every
//     delete bound to a UID), NODE Pod reads for eligibility, and Secrets by
//     get/create/update/delete only: no list or watch, so it never holds
//     every Secret of the namespace;
//   - in the storage namespace, the per-node credentials
//     (nodecredentials.go): ServiceAccounts, Roles and RoleBindings, by get
//     (no list or watch), create, update and delete. The Roles grant get on
//     named Secrets, which the API server's escalation check allows because
//     the controller holds get on the namespace's Secrets itself;
//   - in the storage namespace, the replica hosts' Leases (liveness.go):
//     get, list and watch, never a write: a host's heartbeat is its own;
//   - in its own namespace (cellfleet-system): the CA Secrets, get, create
//     and delete only;
//   - events of the cluster-scoped volumes, which land in "default";
//   - the nominal expansion of the local driver's backing claims
//     (growth.go): PV get and update (capacity), and claim status update.
// VolumeReplica status is the replica hosts'; the controller never writes it.

// +kubebuilder:rbac:groups=storage.eric.dev,resources=replicatedvolumes,verbs=get;list;watch;update;delete
// +kubebuilder:rbac:groups=storage.eric.dev,resources=replicatedvolumes/status,verbs=get;update
// +kubebuilder:rbac:groups=storage.eric.dev,resources=replicatedvolumes/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get

// +kubebuilder:rbac:groups=storage.eric.dev,namespace=cellfleet-storage,resources=volumereplicas,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=cellfleet-storage,resources=persistentvolumeclaims,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",namespace=cellfleet-storage,resources=persistentvolumeclaims/status,verbs=update
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;update
// +kubebuilder:rbac:groups="",namespace=cellfleet-storage,resources=services,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",namespace=cellfleet-storage,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=cellfleet-storage,resources=secrets,verbs=get;create;update;delete
// +kubebuilder:rbac:groups="",namespace=cellfleet-storage,resources=serviceaccounts,verbs=get;create;update;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,namespace=cellfleet-storage,resources=roles;rolebindings,verbs=get;create;update;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=cellfleet-storage,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=cellfleet-system,resources=secrets,verbs=get;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,namespace=default,resources=events,verbs=create;patch
