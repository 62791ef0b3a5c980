package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FleetProfile is how a fleet keeps its state: Bucket or PersistentFleet
// (docs/fleet-operator.md, "Profiles").
// +kubebuilder:validation:Enum=Bucket;PersistentFleet
type FleetProfile string

const (
	// ProfileBucket runs celld with bucket durability: members have no disks
	// (an emptyDir at /work) and every acknowledged write is in the bucket.
	ProfileBucket FleetProfile = "Bucket"
	// ProfilePersistentFleet runs celld as a StatefulSet whose members keep
	// their disks across restart, upgrade and scale-in (docs/fleet-operator.md,
	// "Disks").
	ProfilePersistentFleet FleetProfile = "PersistentFleet"
)

// BucketWorkload is the workload kind that runs a Bucket fleet.
// +kubebuilder:validation:Enum=Deployment;Ordered
type BucketWorkload string

const (
	// BucketWorkloadDeployment runs a Bucket fleet as a Deployment.
	BucketWorkloadDeployment BucketWorkload = "Deployment"
	// BucketWorkloadOrdered runs a Bucket fleet as a StatefulSet whose Pods
	// are released into zones by ordinal.
	BucketWorkloadOrdered BucketWorkload = "Ordered"
)

// CapacityMode is who sets the replica count and how.
// +kubebuilder:validation:Enum=Shadow;ScaleOut;Automatic;External
type CapacityMode string

const (
	// CapacityShadow computes and records the capacity policy's decisions
	// without applying them.
	CapacityShadow CapacityMode = "Shadow"
	// CapacityScaleOut applies the policy's growth and never contracts.
	CapacityScaleOut CapacityMode = "ScaleOut"
	// CapacityAutomatic applies growth and contraction; contraction needs
	// survivor-capacity evidence.
	CapacityAutomatic CapacityMode = "Automatic"
	// CapacityExternal leaves the replica count to an external system that
	// writes it through the scale subresource; contraction still needs
	// survivor-capacity evidence.
	CapacityExternal CapacityMode = "External"
)

// PlacementMode is how strictly members are spread over zones and hosts.
// +kubebuilder:validation:Enum=Strict;Relaxed
type PlacementMode string

const (
	// PlacementStrict requires zone spread and hostname anti-affinity: a
	// member that cannot be placed stays pending.
	PlacementStrict PlacementMode = "Strict"
	// PlacementRelaxed prefers zone spread and hostname anti-affinity.
	PlacementRelaxed PlacementMode = "Relaxed"
)

// CelldFleetSpec is the desired fleet.
//
// +kubebuilder:validation:XValidation:rule="!has(self.bucketWorkload) || self.bucketWorkload != 'Ordered' || self.profile == 'Bucket'",message="spec.bucketWorkload: Ordered is allowed only with profile Bucket"
// +kubebuilder:validation:XValidation:rule="has(self.bucketWorkload) == has(oldSelf.bucketWorkload) && (!has(self.bucketWorkload) || self.bucketWorkload == oldSelf.bucketWorkload)",message="spec.bucketWorkload is immutable"
// +kubebuilder:validation:XValidation:rule="self.profile != 'PersistentFleet' || has(self.storage.storageClassName)",message="spec.storage.storageClassName is required with profile PersistentFleet"
// +kubebuilder:validation:XValidation:rule="self.profile == 'PersistentFleet' || !has(self.storage.storageClassName)",message="spec.storage.storageClassName is allowed only with profile PersistentFleet"
// +kubebuilder:validation:XValidation:rule="self.profile != 'PersistentFleet' || has(self.storage.sizeGiB)",message="spec.storage.sizeGiB is required with profile PersistentFleet"
// +kubebuilder:validation:XValidation:rule="self.profile == 'PersistentFleet' || !has(self.storage.sizeGiB)",message="spec.storage.sizeGiB is allowed only with profile PersistentFleet (Bucket members have no disks)"
// +kubebuilder:validation:XValidation:rule="!has(self.placement) || self.replicas >= self.placement.azCount",message="spec.replicas must be at least spec.placement.azCount"
// +kubebuilder:validation:XValidation:rule="!has(self.capacity) || (self.replicas >= self.capacity.minReplicas && self.replicas <= self.capacity.maxReplicas)",message="spec.replicas must lie within spec.capacity.minReplicas and spec.capacity.maxReplicas"
type CelldFleetSpec struct {
	// profile is how the fleet keeps its state: Bucket (no disks, bucket
	// durability) or PersistentFleet (a StatefulSet whose members keep their
	// disks). It cannot be changed after creation.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.profile is immutable"
	Profile FleetProfile `json:"profile"`

	// bucketWorkload is the workload that runs a Bucket fleet: a Deployment
	// (the default when absent) or Ordered, a StatefulSet whose Pods are
	// released into zones by ordinal. Ordered is allowed only with profile
	// Bucket. It cannot be changed after creation.
	// +optional
	BucketWorkload BucketWorkload `json:"bucketWorkload,omitempty"`

	// replicas is the number of celld members, 1 to 100. It is also the
	// scale subresource's replica count.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Replicas int32 `json:"replicas,omitempty"`

	// runtimeImage is the celld runtime image, pinned by digest:
	// registry/path@sha256:<64 lowercase hex>. There is no default image.
	// +required
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)+@sha256:[a-f0-9]{64}$')",message="spec.runtimeImage must be pinned by digest as registry/path@sha256:<64 lowercase hex>",messageExpression="'spec.runtimeImage ' + self + ' must be pinned by digest as registry/path@sha256:<64 lowercase hex>'"
	RuntimeImage string `json:"runtimeImage"`

	// maintenance holds the administrator's levers: pause and rolling restart.
	// +optional
	Maintenance *Maintenance `json:"maintenance,omitempty"`

	// capacity is the capacity policy. Absent, the replica count is exactly
	// spec.replicas.
	// +optional
	Capacity *Capacity `json:"capacity,omitempty"`

	// serviceAccountName is the ServiceAccount the members run as; it carries
	// the bucket credentials (the operator has no S3 client). Absent, the
	// namespace's default ServiceAccount is used.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.serviceAccountName must be a DNS subdomain (lowercase letters, digits, '-' and '.')",messageExpression="'spec.serviceAccountName ' + self + ' must be a DNS subdomain (lowercase letters, digits, hyphens and dots)'"
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// storage is the fleet's bucket and, for PersistentFleet, its disks. It
	// cannot be changed after creation: the bucket is reserved for this fleet
	// and a StatefulSet's claim templates are immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.storage is immutable"
	Storage Storage `json:"storage"`

	// placement spreads members over zones and hosts.
	// +optional
	Placement *Placement `json:"placement,omitempty"`

	// execution is the members' compute requests and limits.
	// +optional
	Execution *Execution `json:"execution,omitempty"`

	// lifecycle bounds a member's shutdown.
	// +optional
	// +kubebuilder:default={shutdownSeconds:30,terminationGraceSeconds:45}
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`

	// env is extra CELLD_* environment for every member. Names the operator
	// sets itself (CELLD_NODE, CELLD_ADVERTISE, CELLD_BUCKET,
	// CELLD_DURABILITY, CELLD_WATCH, CELLD_ADDR, CELLD_INTERNAL_ADDR,
	// CELLD_SHUTDOWN_TOTAL_MS) are rejected.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Env []EnvVar `json:"env,omitempty"`
}

// CelldFleetStatus is what the operator last observed, rebuilt from the
// cluster on every reconcile.
type CelldFleetStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// desiredReplicas is the replica count the operator is working towards.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`

	// appliedReplicas is the replica count written to the workload.
	// +optional
	AppliedReplicas int32 `json:"appliedReplicas,omitempty"`

	// replicas is the number of member Pods that exist (the scale
	// subresource's status replica count).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of Ready members.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// updatedReplicas is the number of members on the current template.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`

	// selector is the label selector of the members, for the scale
	// subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// unschedulableMembers names the members the scheduler cannot place.
	// +optional
	// +listType=set
	UnschedulableMembers []string `json:"unschedulableMembers,omitempty"`

	// blockedSince is when the Blocked condition last became True; absent
	// while the fleet is not blocked.
	// +optional
	BlockedSince *metav1.Time `json:"blockedSince,omitempty"`

	// members is the operator's record of each PersistentFleet member: the
	// revision it was last seen Ready on and, while it is down, since when.
	// The cluster forgets both when a member's Pod is recreated; this record
	// outlives the Pod and the operator process (docs/fleet-operator.md,
	// Self-healing).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	Members []MemberStatus `json:"members,omitempty"`

	// conditions are Ready, Progressing, Blocked, MaintenancePaused and
	// Deleting.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MemberStatus is the operator's record of one PersistentFleet member.
type MemberStatus struct {
	// name is the member's Pod name, <fleet>-<ordinal>.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// readyRevision is the StatefulSet revision (the Pod's
	// controller-revision-hash label) the member was last seen Ready on. A
	// down member on another revision has never been Ready on it: it waits
	// on its image or configuration, and keeps its disk.
	// +optional
	ReadyRevision string `json:"readyRevision,omitempty"`

	// downSince is the first moment the member was down with no Ready period
	// since, across every Pod it has had on downRevision; absent while it is
	// Ready. The replacement delay is timed from it.
	// +optional
	DownSince *metav1.Time `json:"downSince,omitempty"`

	// downRevision is the revision downSince is timed on. A down member whose
	// Pod moves to another revision (a rollout or a rollback reached it) is
	// timed afresh from that Pod: time spent waiting on one revision's image
	// or configuration is not time down on another.
	// +optional
	DownRevision string `json:"downRevision,omitempty"`

	// replacementDue is when the operator will replace this down member on a
	// fresh disk if it has not come back by then; absent while it is Ready or
	// while a rule of self-healing keeps its disk (the Healing condition says
	// which). It is derived on each reconcile, never read back.
	// +optional
	ReplacementDue *metav1.Time `json:"replacementDue,omitempty"`
}

// CelldFleet is a fleet of the celld runtime.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=cf,categories=celld
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.spec.profile`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Blocked",type=string,JSONPath=`.status.conditions[?(@.type=="Blocked")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CelldFleet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired fleet.
	// +required
	Spec CelldFleetSpec `json:"spec"`

	// status is what the operator last observed.
	// +optional
	Status CelldFleetStatus `json:"status,omitempty"`
}

// CelldFleetList is a list of CelldFleets.
//
// +kubebuilder:object:root=true
type CelldFleetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CelldFleet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CelldFleet{}, &CelldFleetList{})
}
