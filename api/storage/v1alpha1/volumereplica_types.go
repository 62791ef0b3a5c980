package v1alpha1

// VolumeReplica is one replica of a ReplicatedVolume, created by the manager
// in the driver's namespace and run as a worker by the replica host of its
// node (docs/architecture.md, "Replicated volume";
// docs/volume-controller.md). The manager writes the spec; the replica host
// writes the status.
//
// Identity fields (volume, node, port, backing claim) never change: a replica
// keeps its PVC, journal and Service identity for life, and a replacement is
// a new VolumeReplica. The generation only grows, so a host can tell a stale
// spec from a current one. Peers change with Raft membership.

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Port bounds of a replica listener: unprivileged ports only.
const (
	MinReplicaPort = 1024
	MaxReplicaPort = 65535
	// MaxPeers is MaxReplicas: a replica lists every other member, and
	// while a replacement is in progress a group has one member more than
	// its replica count (the new replica and the one it replaces).
	MaxPeers = MaxReplicas
	// MaxMembers bounds a Raft configuration: MaxReplicas plus the one
	// replacement in progress.
	MaxMembers = MaxReplicas + 1
)

// VolumeReplicaSpec is the manager's intent for one replica.
type VolumeReplicaSpec struct {
	// volumeName is the ReplicatedVolume this replica belongs to.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=60
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.volumeName is immutable"
	VolumeName string `json:"volumeName"`

	// node is the Kubernetes node whose replica host runs this replica; its
	// backing claim is bound to the same node.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.node is immutable"
	Node string `json:"node"`

	// port is the worker's listener port on the node, allocated per node by
	// the manager; the replica's selectorless Service routes to it.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.port is immutable"
	Port int32 `json:"port"`

	// peers are the other members of the volume's Raft group, by replica name
	// and Service address. The replica itself is never listed.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=5
	Peers []ReplicaPeer `json:"peers,omitempty"`

	// backingClaimName is the PersistentVolumeClaim, in this namespace, that
	// holds the replica's journal, checkpoints, identity and files.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.backingClaimName is immutable"
	BackingClaimName string `json:"backingClaimName"`

	// generation is the manager's lifecycle generation of this replica (not
	// metadata.generation): a generation-guarded request such as a runtime
	// transition raises it, and a host ignores intent older than what it has
	// acted on. It never decreases.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="spec.generation must not decrease"
	Generation int64 `json:"generation,omitempty"`

	// Growth (volume expansion). Kept apart from the identity and
	// membership fields above: the volume controller raises it, the host
	// holding the coordinator commits it through Raft.

	// capacity is the filesystem capacity the volume controller wants this
	// replica's group to serve: the volume's capacity once every backing
	// claim holds that much. The coordinator's host commits it through Raft
	// (a volume's capacity is replicated state); every host reports what it
	// serves in status.capacity. It only grows.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.capacity must be greater than zero"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="spec.capacity may grow but never shrink"
	Capacity *resource.Quantity `json:"capacity,omitempty"`
	// --- Replacement (docs/decisions/0006-replica-replacement.md). ---

	// replaces is the VolumeReplica this one replaces, set when the volume
	// controller allocates a replacement for a permanently lost replica. A
	// replacement joins the existing Raft group through a membership change
	// and never bootstraps a configuration of its own.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.replaces is immutable"
	Replaces string `json:"replaces,omitempty"`

	// membership is the one Raft membership change the volume controller
	// asks of the volume's coordinator. It is written on every member; the
	// host whose worker is the coordinator performs it through Raft, only
	// with a healthy quorum, and reports the outcome in its status with the
	// generation it performed. A host never performs a generation older
	// than one it reported.
	// +optional
	Membership *MembershipChange `json:"membership,omitempty"`
}

// MembershipOperation is a Raft configuration change.
// +kubebuilder:validation:Enum=Add;Remove
type MembershipOperation string

const (
	// MembershipAdd adds a voter; it catches up from the journal or a
	// checkpoint within the sending host's rebuild bounds.
	MembershipAdd MembershipOperation = "Add"
	// MembershipRemove removes a voter.
	MembershipRemove MembershipOperation = "Remove"
)

// MembershipChange is one requested Raft configuration change.
type MembershipChange struct {
	// generation orders the volume's membership changes; it only grows.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Minimum=1
	Generation int64 `json:"generation"`

	// operation is Add or Remove.
	// +kubebuilder:validation:Required
	Operation MembershipOperation `json:"operation"`

	// member is the replica to add or remove.
	// +kubebuilder:validation:Required
	Member ReplicaPeer `json:"member"`
}

// MembershipResult is how a requested membership change ended.
// +kubebuilder:validation:Enum=Succeeded;Failed
type MembershipResult string

const (
	// MembershipSucceeded: the configuration change committed.
	MembershipSucceeded MembershipResult = "Succeeded"
	// MembershipFailed: the change did not commit; the host tries again on
	// a later pass while it is the coordinator.
	MembershipFailed MembershipResult = "Failed"
)

// MembershipOutcome is what the coordinator's host did with a request.
type MembershipOutcome struct {
	// generation is the request's generation.
	// +kubebuilder:validation:Minimum=1
	Generation int64 `json:"generation"`
	// operation is the request's operation.
	Operation MembershipOperation `json:"operation"`
	// member is the replica added or removed.
	// +kubebuilder:validation:MaxLength=63
	Member string `json:"member"`
	// result is Succeeded or Failed.
	Result MembershipResult `json:"result"`
	// message says why a change failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ReplicaPeer is another member of the replica's Raft group.
type ReplicaPeer struct {
	// name is the peer's VolumeReplica name; it is also its Raft server ID.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// address is the DNS name of the peer's replica Service (also the SAN of
	// its certificate).
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Address string `json:"address"`

	// port is the peer's listener port.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// VolumeReplicaStatus is what the replica host observed of its worker.
type VolumeReplicaStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// role is the worker's current Raft role.
	// +optional
	Role ReplicaRole `json:"role,omitempty"`

	// appliedIndex is the last journal index applied to the backing files.
	// Always written, 0 included: the APPLIED column prints it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AppliedIndex int64 `json:"appliedIndex"`

	// lag is how many entries the replica is behind the coordinator's
	// commit index, as last observed. Always written, 0 included: the LAG
	// column prints it, and a current replica shows 0, not a blank.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Lag int64 `json:"lag"`

	// capacity is the filesystem capacity this replica serves: the
	// volume's replicated capacity as far as it has applied the journal.
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`

	// releasedClaimUID is the replica host's identity-bound release
	// acknowledgement: set, once the replica is being deleted, to the UID of
	// the backing claim whose worker it closed and whose publication it
	// removed. The manager reclaims that claim, and only that one, after it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ReleasedClaimUID string `json:"releasedClaimUID,omitempty"`

	// --- Replacement (docs/decisions/0006-replica-replacement.md). ---

	// members is the Raft configuration (replica names) as this replica's
	// worker last saw it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=6
	// +kubebuilder:validation:items:MaxLength=63
	Members []string `json:"members,omitempty"`

	// membership is the outcome of the last membership change this
	// replica's host performed as the volume's coordinator.
	// +optional
	Membership *MembershipOutcome `json:"membership,omitempty"`

	// --- Divergence (docs/replica-engine.md, "State digests"). ---

	// digest is the last state digest the host published for this replica:
	// a SHA-256 of the whole replicated state at an applied command index.
	// Replicas at the same index must publish the same value; the volume
	// controller compares them (the ReplicatedVolume's Diverged condition).
	// The host computes one only after the applied index has been still for
	// its quiet period, at most once per replica per digest interval, or on
	// request (AnnotationDigestRequested).
	// +optional
	Digest *StateDigest `json:"digest,omitempty"`

	// conditions are Ready, Admitted, Published, ReplicaStateLost and Released.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StateDigest is a replica's state digest at one applied command index.
type StateDigest struct {
	// index is the applied command index (the Raft index of the last
	// command applied) the digest describes. Noop and configuration
	// entries do not move it, so replicas compare across elections.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Minimum=0
	Index int64 `json:"index"`

	// value is the hex SHA-256 of the whole state at index: namespace,
	// attributes, extended attributes, file contents, the fencing epoch,
	// the limits and the exactly-once table (fsm.FSM.Digest).
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	Value string `json:"value"`

	// time is when the host computed the digest.
	// +kubebuilder:validation:Required
	Time metav1.Time `json:"time"`

	// request is the value of the digest-requested annotation this digest
	// answered, empty for a digest the host took on its own. A requester
	// waits until it reads its own value back.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Request string `json:"request,omitempty"`
}

// VolumeReplica is one replica of a ReplicatedVolume, hosted as a Raft
// worker by the replica host of its node.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=vr;vrep,categories=cellfleet
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Volume",type=string,JSONPath=`.spec.volumeName`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=`.spec.port`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.status.role`
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.appliedIndex`
// +kubebuilder:printcolumn:name="Lag",type=integer,JSONPath=`.status.lag`
// +kubebuilder:printcolumn:name="Digest",type=integer,priority=1,JSONPath=`.status.digest.index`
// +kubebuilder:printcolumn:name="Lost",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="ReplicaStateLost")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.peers) || self.spec.peers.all(p, p.name != self.metadata.name)",message="spec.peers must not list the replica itself"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.capacity) || has(self.spec.capacity)",message="spec.capacity cannot be removed once set"
// +kubebuilder:printcolumn:name="Capacity",type=string,priority=1,JSONPath=`.status.capacity`
type VolumeReplica struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the manager's intent.
	// +kubebuilder:validation:Required
	Spec VolumeReplicaSpec `json:"spec"`

	// status is the replica host's observation.
	// +optional
	Status VolumeReplicaStatus `json:"status,omitempty"`
}

// VolumeReplicaList is a list of VolumeReplicas.
//
// +kubebuilder:object:root=true
type VolumeReplicaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VolumeReplica `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VolumeReplica{}, &VolumeReplicaList{})
}
