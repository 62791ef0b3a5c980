package v1alpha1

// The parts of a CelldFleet's spec: maintenance levers, capacity policy,
// storage, placement, compute and lifecycle bounds, and extra environment.

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

// Maintenance holds the administrator's levers.
type Maintenance struct {
	// paused stops the operator from changing the workload, replacing members
	// or deleting disks; it releases replacement holds already prepared.
	// +optional
	// +kubebuilder:default=false
	Paused bool `json:"paused,omitempty"`

	// restartToken, when changed, rolls every member through the
	// StatefulSet's (or Deployment's) rolling update: it is written as a Pod
	// template annotation.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RestartToken string `json:"restartToken,omitempty"`
}

// Capacity is the capacity policy: who may change the replica count, within
// which bounds and by how much per step.
//
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="spec.capacity.minReplicas must be at most spec.capacity.maxReplicas"
// +kubebuilder:validation:XValidation:rule="self.step <= self.maxReplicas - self.minReplicas || self.minReplicas == self.maxReplicas",message="spec.capacity.step must be at most spec.capacity.maxReplicas - spec.capacity.minReplicas"
type Capacity struct {
	// mode is Shadow (record decisions only), ScaleOut (grow only),
	// Automatic (grow and contract) or External (an external system writes
	// the scale subresource).
	// +required
	Mode CapacityMode `json:"mode"`

	// minReplicas is the fewest members the policy may run, 1 to 100.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MinReplicas int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most members the policy may run, 1 to 100.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxReplicas int32 `json:"maxReplicas"`

	// step is the most members one policy decision adds or removes.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	Step int32 `json:"step,omitempty"`
}

// Storage is the fleet's bucket and, for PersistentFleet, its disks.
type Storage struct {
	// bucket is the S3 bucket the fleet owns (one fleet per bucket, recorded
	// by a CelldStorageReservation).
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9.-]*[a-z0-9]$')",message="spec.storage.bucket must be an S3 bucket name: lowercase letters, digits, '.' and '-', starting and ending with a letter or digit",messageExpression="'spec.storage.bucket ' + self + ' must be an S3 bucket name: lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit'"
	Bucket string `json:"bucket"`

	// region is the bucket's region, passed to celld as AWS_REGION.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]+(-[a-z0-9]+)*$')",message="spec.storage.region must be lowercase letters and digits separated by '-'",messageExpression="'spec.storage.region ' + self + ' must be lowercase letters and digits separated by hyphens'"
	Region string `json:"region,omitempty"`

	// storageClassName is the StorageClass of each member's disk. Required
	// with PersistentFleet; forbidden otherwise.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.storage.storageClassName must be a DNS subdomain",messageExpression="'spec.storage.storageClassName ' + self + ' must be a DNS subdomain'"
	StorageClassName *string `json:"storageClassName,omitempty"`

	// sizeGiB is each member's disk size in GiB, 1 to 65536. Required with
	// PersistentFleet; forbidden otherwise.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	SizeGiB *int32 `json:"sizeGiB,omitempty"`
}

// Placement spreads members over zones and hosts.
//
// +kubebuilder:validation:XValidation:rule="size(self.zones) == self.azCount",message="spec.placement.azCount must equal the number of spec.placement.zones"
type Placement struct {
	// zones are the topology.kubernetes.io/zone values members may run in.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:MinLength=1
	Zones []string `json:"zones"`

	// azCount is the number of zones the fleet spans; it must equal the
	// number of zones, and spec.replicas must be at least azCount.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	AZCount int32 `json:"azCount"`

	// mode is Strict (zone spread and hostname anti-affinity required) or
	// Relaxed (preferred).
	// +optional
	// +kubebuilder:default=Strict
	Mode PlacementMode `json:"mode,omitempty"`
}

// Execution is the members' compute requests and limits.
//
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || !has(self.requests.cpu) || !has(self.limits.cpu) || quantity(string(self.limits.cpu)).compareTo(quantity(string(self.requests.cpu))) >= 0",message="spec.execution.limits.cpu must be at least spec.execution.requests.cpu"
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || !has(self.requests.memory) || !has(self.limits.memory) || quantity(string(self.limits.memory)).compareTo(quantity(string(self.requests.memory))) >= 0",message="spec.execution.limits.memory must be at least spec.execution.requests.memory"
type Execution struct {
	// requests is the compute each member is scheduled with.
	// +optional
	Requests *ComputeResources `json:"requests,omitempty"`

	// limits is the most compute each member may use; each limit must be at
	// least its request.
	// +optional
	Limits *ComputeResources `json:"limits,omitempty"`
}

// ComputeResources is an amount of CPU and memory.
type ComputeResources struct {
	// cpu, as a Kubernetes quantity (for example 500m or 2).
	// +optional
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0'))",message="cpu must be a positive quantity"
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// memory, as a Kubernetes quantity (for example 512Mi or 4Gi).
	// +optional
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0'))",message="memory must be a positive quantity"
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// Lifecycle bounds a member's shutdown.
//
// +kubebuilder:validation:XValidation:rule="self.terminationGraceSeconds >= self.shutdownSeconds + 5",message="spec.lifecycle.terminationGraceSeconds must be at least spec.lifecycle.shutdownSeconds + 5"
type Lifecycle struct {
	// shutdownSeconds bounds celld's drain after SIGTERM
	// (CELLD_SHUTDOWN_TOTAL_MS), 1 to 3600.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	ShutdownSeconds int32 `json:"shutdownSeconds,omitempty"`

	// terminationGraceSeconds is the Pod's termination grace period; it must
	// be at least shutdownSeconds + 5 so the drain finishes before SIGKILL.
	// +optional
	// +kubebuilder:default=45
	// +kubebuilder:validation:Minimum=6
	// +kubebuilder:validation:Maximum=3605
	TerminationGraceSeconds int32 `json:"terminationGraceSeconds,omitempty"`
}

// EnvVar is one extra CELLD_* environment variable.
//
// +kubebuilder:validation:XValidation:rule="!(self.name in ['CELLD_NODE', 'CELLD_ADVERTISE', 'CELLD_BUCKET', 'CELLD_DURABILITY', 'CELLD_WATCH', 'CELLD_ADDR', 'CELLD_INTERNAL_ADDR', 'CELLD_SHUTDOWN_TOTAL_MS'])",message="spec.env[].name: this CELLD_* variable is set by the operator and cannot be overridden",messageExpression="'spec.env[].name: ' + self.name + ' is set by the operator and cannot be overridden'"
type EnvVar struct {
	// name starts with CELLD_ followed by capital letters, digits and '_'.
	// +required
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^CELLD_[A-Z0-9_]+$')",message="spec.env[].name must match CELLD_[A-Z0-9_]+",messageExpression="'spec.env[].name ' + self + ' must match CELLD_[A-Z0-9_]+'"
	Name string `json:"name"`

	// value is the variable's value.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
}
