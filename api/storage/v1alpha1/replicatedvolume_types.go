package v1alpha1

// ReplicatedVolume is the application-facing volume of the
// replicated.storage.eric.dev driver (docs/csi.md, "CreateVolume"; the
// provisioning flow in docs/architecture.md, "Replicated volume"): the
// manager records the immutable access mode, replica count, requested
// capacity and backing class when CreateVolume runs, and reports robustness
// from its VolumeReplicas. The spec is a record of provisioning intent, so
// every field of it except a growing capacity is immutable once written:
// changing a count or class in place would silently disagree with the backing
// claims and Raft membership that already exist.

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplicatedVolumeSpec is the provisioning record of a replicated volume.
type ReplicatedVolumeSpec struct {
	// accessMode is the access mode of the source claim. It decides whether
	// more than one node may publish the volume, so it never changes.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.accessMode is immutable"
	AccessMode AccessMode `json:"accessMode"`

	// replicas is the number of backing replicas, each on a distinct node:
	// one Raft group of 1 to 5 members. One replica follows the same
	// implementation and keeps no redundant copy.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.replicas is immutable"
	Replicas int32 `json:"replicas,omitempty"`

	// capacity is the requested capacity of the filesystem; each backing
	// claim requests this much from the backing class. It may grow (volume
	// expansion: the volume controller grows the backing claims) but never
	// shrink, since files already written may need every byte.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.capacity must be greater than zero"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="spec.capacity may grow but never shrink"
	Capacity resource.Quantity `json:"capacity"`

	// backingStorageClassName is the StorageClass of the replicas' backing
	// claims, normally a local.storage.eric.dev class.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.backingStorageClassName is immutable"
	BackingStorageClassName string `json:"backingStorageClassName"`

	// source is the PersistentVolumeClaim the provisioner created this volume
	// for; the provisioner passes its name and namespace to CreateVolume.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.source is immutable"
	Source ClaimReference `json:"source"`
}

// ClaimReference names a PersistentVolumeClaim.
type ClaimReference struct {
	// namespace is the claim's namespace.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// name is the claim's name.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// ReplicatedVolumeStatus is observed state, rebuilt from the VolumeReplicas
// on every reconcile; it is never an input.
type ReplicatedVolumeStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// robustness is Healthy when every replica is a current member, Degraded
	// when a quorum serves with fewer, and Faulted when no quorum serves.
	// +optional
	Robustness Robustness `json:"robustness,omitempty"`

	// coordinator is the name of the VolumeReplica that last reported itself
	// coordinator. Clients discover the coordinator from the workers
	// themselves; this field is for people, not for routing.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Coordinator string `json:"coordinator,omitempty"`

	// capacity is the filesystem capacity every replica serves (the
	// smallest any replica reports); below spec.capacity while the volume
	// grows, and the Resizing condition says why.
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`

	// replicas summarises each VolumeReplica of the volume.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=6
	Replicas []ReplicaSummary `json:"replicas,omitempty"`

	// conditions are Ready, Placed, Degraded, Resizing, Replacing, Diverged and Deleting.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ReplicaSummary is one replica's line in a volume's status.
type ReplicaSummary struct {
	// name is the VolumeReplica's name.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// node is the node hosting the replica.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node,omitempty"`

	// role is the replica's last reported Raft role.
	// +optional
	Role ReplicaRole `json:"role,omitempty"`

	// appliedIndex is the last journal index applied to the backing files.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AppliedIndex int64 `json:"appliedIndex,omitempty"`

	// lag is how many journal entries the replica is behind the coordinator.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Lag int64 `json:"lag,omitempty"`

	// ready mirrors the replica's Ready condition.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// stateLost mirrors the replica's ReplicaStateLost condition.
	// +optional
	StateLost bool `json:"stateLost,omitempty"`

	// digest mirrors the replica's last published state digest.
	// +optional
	Digest *StateDigest `json:"digest,omitempty"`
}

// ReplicatedVolume is one replicated filesystem volume: a Raft group of
// replicas on distinct nodes, exposed to applications through FUSE.
//
// Its name becomes the prefix of the replica Services `<name>-r<i>`, so it
// must be a DNS label of at most 60 characters.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=rv;rvol,categories=cellfleet
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Access",type=string,JSONPath=`.spec.accessMode`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=`.spec.capacity`
// +kubebuilder:printcolumn:name="Robustness",type=string,JSONPath=`.status.robustness`
// +kubebuilder:printcolumn:name="Coordinator",type=string,JSONPath=`.status.coordinator`
// +kubebuilder:printcolumn:name="Claim",type=string,priority=1,JSONPath=`.spec.source.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 60",message="metadata.name must be at most 60 characters so the replica Services <name>-r<i> are valid DNS labels"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (lower case letters, digits and '-', starting with a letter) because it names the replica Services"
type ReplicatedVolume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the provisioning record; immutable.
	// +kubebuilder:validation:Required
	Spec ReplicatedVolumeSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status ReplicatedVolumeStatus `json:"status,omitempty"`
}

// ReplicatedVolumeList is a list of ReplicatedVolumes.
//
// +kubebuilder:object:root=true
type ReplicatedVolumeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReplicatedVolume `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ReplicatedVolume{}, &ReplicatedVolumeList{})
}
