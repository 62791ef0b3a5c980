package controller

// RBAC of the CSI controller, generated into config/rbac/csi-controller
// (hack/rbac-gen.sh). It reads through the API server directly and never
// watches, so it needs no list/watch on what it only gets:
//   - ReplicatedVolumes: get, create, delete (bound to a UID), update (spec
//     capacity growth only; the CEL rules refuse anything else);
//   - StorageClasses: get (the backing class must exist, allow expansion);
//   - CSIStorageCapacities: list (the backing class's per-node capacity);
//   - VolumeReplicas: list, in the storage namespace only (the endpoints
//     of the volume context).
// It never touches claims, Services, Secrets or VolumeReplica writes: those
// are the volume controller's.

// +kubebuilder:rbac:groups=storage.eric.dev,resources=replicatedvolumes,verbs=get;create;update;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get
// +kubebuilder:rbac:groups=storage.k8s.io,resources=csistoragecapacities,verbs=list
// +kubebuilder:rbac:groups=storage.eric.dev,namespace=cellfleet-storage,resources=volumereplicas,verbs=list
