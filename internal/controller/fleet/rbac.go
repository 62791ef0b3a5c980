package fleet

// RBAC exactly as docs/fleet-operator.md ("Deployment notes") lists it. The
// ClusterRole covers only the fleet API and StorageClass reads: no
// PersistentVolume, Node or VolumeAttachment access. The namespaced Role (in
// the fleet namespace) grants Pod and claim deletion (every delete is bound to
// the object's UID), Pod update for the replacement handoff record and
// finalizer and for releasing Ordered members into zones, Service update only
// to fill declared fields, and convergence of workloads, budgets and
// NetworkPolicies. It grants no claim creation: the StatefulSet creates claims.
// No verb the operator does not use is granted (it never patches: every write
// is an Update bound to a resourceVersion); the one grant beyond the rules
// above is recording the fleet's events (events.k8s.io, the API the operator's
// recorder writes) in its namespace.

// +kubebuilder:rbac:groups=celld.eric.dev,resources=celldfleets,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=celld.eric.dev,resources=celldfleets/status,verbs=get;update
// +kubebuilder:rbac:groups=celld.eric.dev,resources=celldfleets/finalizers,verbs=update
// +kubebuilder:rbac:groups=celld.eric.dev,resources=celldstoragereservations,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// +kubebuilder:rbac:groups="",namespace=celld,resources=pods,verbs=get;list;watch;update;delete
// +kubebuilder:rbac:groups="",namespace=celld,resources=persistentvolumeclaims,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",namespace=celld,resources=services,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",namespace=celld,resources=serviceaccounts,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,namespace=celld,resources=statefulsets;deployments,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=policy,namespace=celld,resources=poddisruptionbudgets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=events.k8s.io,namespace=celld,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=networking.k8s.io,namespace=celld,resources=networkpolicies,verbs=get;list;watch;create;update
