package v1alpha1

// Conditions, roles and robustness levels of the storage API.
//
// Each condition says one independent thing (STYLE.md): a volume can be Ready
// and Degraded at once, and a replica can be Admitted yet have lost its state.
// Reasons are typed so controllers and the replica host compare constants,
// never string literals.

// ConditionType names a condition in a status' conditions list.
type ConditionType string

// ConditionReason is the machine-readable reason of a condition.
type ConditionReason string

// String returns the condition type as metav1.Condition stores it.
func (t ConditionType) String() string { return string(t) }

// String returns the reason as metav1.Condition stores it.
func (r ConditionReason) String() string { return string(r) }

// Condition types of a ReplicatedVolume.
const (
	// VolumeReady is True when a coordinator serves the volume with a quorum
	// (CreateVolume returns then: docs/csi.md, "CreateVolume").
	VolumeReady ConditionType = "Ready"
	// VolumePlaced is True when the manager chose distinct eligible nodes for
	// every replica and created their backing claims and VolumeReplicas.
	VolumePlaced ConditionType = "Placed"
	// VolumeDegraded is True while fewer replicas than requested are current
	// members serving with the coordinator; I/O may still continue.
	VolumeDegraded ConditionType = "Degraded"
	// VolumeResizing is True while the capacity the replicas serve is below
	// spec.capacity: the backing claims grow, then the coordinator commits
	// the larger capacity through Raft.
	VolumeResizing ConditionType = "Resizing"
	// VolumeReplacing is True while a permanently lost replica is being
	// replaced (its reason names the step, its message the replicas), and
	// also while a lost replica waits for a replacement it cannot have yet
	// (the reason says why). False with NoReplacement otherwise.
	VolumeReplacing ConditionType = "Replacing"
	// VolumeDiverged is True when two replicas published different state
	// digests at the same applied index (reason DigestMismatch, the message
	// names the replicas, the index and the values); False with
	// DigestsAgree when the latest index at which two or more replicas
	// published digests has equal ones; Unknown with DigestsPending until
	// two replicas published at one index. A comparison stands until one at
	// a higher index replaces it.
	VolumeDiverged ConditionType = "Diverged"
	// VolumeDeleting is True while workers close and backing storage is
	// released; storage is preserved while the API is uncertain.
	VolumeDeleting ConditionType = "Deleting"
)

// Condition types of a VolumeReplica.
const (
	// ReplicaReady is True when the worker runs, holds its authority and is a
	// voting member of the volume's Raft configuration.
	ReplicaReady ConditionType = "Ready"
	// ReplicaAdmitted is False when the replica host's bounds (workers,
	// concurrent starts, rebuilds) hold the worker back: an explicit pending or
	// unavailable answer, never a smaller replica count.
	ReplicaAdmitted ConditionType = "Admitted"
	// ReplicaPublished is True when the backing volume is published beneath
	// the consumer mount root and visible in the replica host's mount namespace.
	ReplicaPublished ConditionType = "Published"
	// ReplicaStateLost is True when a recorded replica's retained journal or
	// identity is missing or truncated (docs/replica-engine.md, "Identity,
	// loss and recovery"). The replica is never
	// initialised afresh; the application-data extent of the loss is unknown.
	ReplicaStateLost ConditionType = "ReplicaStateLost"
)

// Reasons shared by the storage conditions.
const (
	// ReasonCoordinatorServing: a coordinator established quorum authority.
	ReasonCoordinatorServing ConditionReason = "CoordinatorServing"
	// ReasonQuorumLost: no majority of replicas is reachable; I/O returns errors.
	ReasonQuorumLost ConditionReason = "QuorumLost"
	// ReasonNoCoordinator: replicas run but no coordinator is elected yet.
	ReasonNoCoordinator ConditionReason = "NoCoordinator"
	// ReasonReplicasPlaced: every replica has a node, claim and VolumeReplica.
	ReasonReplicasPlaced ConditionReason = "ReplicasPlaced"
	// ReasonInsufficientNodes: fewer distinct eligible nodes than replicas.
	ReasonInsufficientNodes ConditionReason = "InsufficientNodes"
	// ReasonAllReplicasCurrent: every requested replica is a current member.
	ReasonAllReplicasCurrent ConditionReason = "AllReplicasCurrent"
	// ReasonReplicaUnavailable: a replica's node or host does not answer; this
	// is unavailability or uncertainty, not confirmed data loss.
	ReasonReplicaUnavailable ConditionReason = "ReplicaUnavailable"
	// ReasonReplicaLost: a replica reports ReplicaStateLost.
	ReasonReplicaLost ConditionReason = "ReplicaLost"
	// ReasonReleasePending: waiting for the replica host's identity-bound
	// release acknowledgement before reclaiming backing storage.
	ReasonReleasePending ConditionReason = "ReleasePending"
	// ReasonAPIUncertain: the API answered ambiguously; storage is preserved.
	ReasonAPIUncertain ConditionReason = "APIUncertain"

	// ReasonWorkerRunning: the worker is running and a voting member.
	ReasonWorkerRunning ConditionReason = "WorkerRunning"
	// ReasonWorkerStarting: the worker is starting or catching up.
	ReasonWorkerStarting ConditionReason = "WorkerStarting"
	// ReasonAdmissionPending: a host bound is full; the worker waits its turn.
	ReasonAdmissionPending ConditionReason = "AdmissionPending"
	// ReasonAdmitted: the host admitted the worker.
	ReasonAdmitted ConditionReason = "Admitted"
	// ReasonAwaitingPublication: the backing volume is not yet published
	// beneath the consumer mount root or not yet visible to the host.
	ReasonAwaitingPublication ConditionReason = "AwaitingPublication"
	// ReasonPublicationVisible: the bind is visible in the host's namespace.
	ReasonPublicationVisible ConditionReason = "PublicationVisible"
	// ReasonPublicationRefused: the backing PV is not the local driver's
	// (local.storage.eric.dev), so the host never asks for its publication.
	ReasonPublicationRefused ConditionReason = "PublicationRefused"
	// ReasonPublishFailed: the local driver's NodePublishVolume failed; the
	// message carries its CSI error.
	ReasonPublishFailed ConditionReason = "PublishFailed"
	// ReasonUnpublishFailed: the local driver's NodeUnpublishVolume failed
	// after the worker closed; the release is not acknowledged yet.
	ReasonUnpublishFailed ConditionReason = "UnpublishFailed"
	// ReasonJournalMissing: the retained Raft journal is absent.
	ReasonJournalMissing ConditionReason = "JournalMissing"
	// ReasonJournalTruncated: the retained Raft journal ends before the
	// recorded index.
	ReasonJournalTruncated ConditionReason = "JournalTruncated"
	// ReasonIdentityMissing: the replica identity record is absent.
	ReasonIdentityMissing ConditionReason = "IdentityMissing"
	// ReasonIdentityTruncated: the identity record is unreadable or short.
	ReasonIdentityTruncated ConditionReason = "IdentityTruncated"
	// ReasonStateIntact: the retained journal and identity verified.
	ReasonStateIntact ConditionReason = "StateIntact"
)

// Robustness summarises how much failure a ReplicatedVolume can still absorb.
// +kubebuilder:validation:Enum=Healthy;Degraded;Faulted
type Robustness string

const (
	// RobustnessHealthy: every requested replica is a current member.
	RobustnessHealthy Robustness = "Healthy"
	// RobustnessDegraded: a quorum serves, but at least one replica is missing
	// or behind, so fewer further failures are tolerated.
	RobustnessDegraded Robustness = "Degraded"
	// RobustnessFaulted: no quorum serves; I/O returns errors.
	RobustnessFaulted Robustness = "Faulted"
)

// ReplicaRole is a replica's role in its volume's Raft group.
// +kubebuilder:validation:Enum=Coordinator;Follower;Candidate;Stopped
type ReplicaRole string

const (
	// RoleCoordinator: the Raft leader; it orders mutations and serves reads.
	RoleCoordinator ReplicaRole = "Coordinator"
	// RoleFollower: a voting member replicating the coordinator's journal.
	RoleFollower ReplicaRole = "Follower"
	// RoleCandidate: an election is in progress.
	RoleCandidate ReplicaRole = "Candidate"
	// RoleStopped: no worker runs for this replica on its host.
	RoleStopped ReplicaRole = "Stopped"
)

// AccessMode is the access mode a ReplicatedVolume was provisioned with; it
// mirrors the source claim's access mode and never changes.
// +kubebuilder:validation:Enum=ReadWriteOnce;ReadWriteOncePod;ReadOnlyMany;ReadWriteMany
type AccessMode string

const (
	// AccessReadWriteOnce: read-write by the Pods of one node.
	AccessReadWriteOnce AccessMode = "ReadWriteOnce"
	// AccessReadWriteOncePod: read-write by a single Pod.
	AccessReadWriteOncePod AccessMode = "ReadWriteOncePod"
	// AccessReadOnlyMany: read-only by many nodes.
	AccessReadOnlyMany AccessMode = "ReadOnlyMany"
	// AccessReadWriteMany: read-write by many nodes.
	AccessReadWriteMany AccessMode = "ReadWriteMany"
)

// Replica count bounds of a ReplicatedVolume (docs/architecture.md,
// "Replicated volume").
const (
	MinReplicas     = 1
	MaxReplicas     = 5
	DefaultReplicas = 3
)

// Lifecycle reasons of the volume controller.
const (
	// ReasonPending: the volume cannot be placed yet; the message names what
	// is missing (how many eligible nodes, which requirement fails).
	ReasonPending ConditionReason = "Pending"
	// ReasonProvisioning: replicas are placed; their trust, claims and
	// Services are being created or the hosts have not reported yet.
	ReasonProvisioning ConditionReason = "Provisioning"
	// ReasonNotDeleting: the volume is not being deleted.
	ReasonNotDeleting ConditionReason = "NotDeleting"
	// ReasonWorkerClosed: the host closed the replica's worker and unpublished
	// its backing volume; the claim may be reclaimed.
	ReasonWorkerClosed ConditionReason = "WorkerClosed"
)

// Growth reasons of the Resizing condition.
const (
	// ReasonClaimsGrowing: a backing claim does not hold the volume's
	// capacity yet.
	ReasonClaimsGrowing ConditionReason = "ClaimsGrowing"
	// ReasonCapacityCommitting: the claims hold it; replicas do not serve
	// it yet (the coordinator commits it through Raft, followers apply it).
	ReasonCapacityCommitting ConditionReason = "CapacityCommitting"
	// ReasonCapacityServed: every replica serves spec.capacity.
	ReasonCapacityServed ConditionReason = "CapacityServed"
)

// Reasons of the Replacing condition (docs/decisions/0006). The steps, in
// order, then what a lost replica may wait for.
const (
	// ReasonNoReplacement: no replica is lost.
	ReasonNoReplacement ConditionReason = "NoReplacement"
	// ReasonAddingReplica: the new replica is allocated and the coordinator
	// is asked to add it to the Raft configuration.
	ReasonAddingReplica ConditionReason = "AddingReplica"
	// ReasonRebuildingReplica: the new replica is a member and catches up.
	ReasonRebuildingReplica ConditionReason = "RebuildingReplica"
	// ReasonRemovingReplica: the coordinator is asked to remove the lost
	// replica from the Raft configuration.
	ReasonRemovingReplica ConditionReason = "RemovingReplica"
	// ReasonRemovingObjects: the lost replica's VolumeReplica, claim,
	// Service and Secret are being removed.
	ReasonRemovingObjects ConditionReason = "RemovingObjects"
	// ReasonAwaitingDelay: a replica's node is gone, for less than
	// --replica-replacement-delay so far.
	ReasonAwaitingDelay ConditionReason = "AwaitingReplacementDelay"
	// ReasonAwaitingQuorum: the other replicas do not hold a healthy quorum;
	// a membership change now could lose acknowledged writes.
	ReasonAwaitingQuorum ConditionReason = "AwaitingQuorum"
	// ReasonAwaitingNode: no eligible node outside the volume's is free.
	ReasonAwaitingNode ConditionReason = "AwaitingEligibleNode"
	// ReasonAwaitingReplacement: another replacement of the volume is in
	// progress; one at a time.
	ReasonAwaitingReplacement ConditionReason = "AwaitingOtherReplacement"
	// ReasonAwaitingReplacementSlot: as many replacements as
	// --max-concurrent-replacements allows are in progress across the
	// cluster; this one starts when one of them ends.
	ReasonAwaitingReplacementSlot ConditionReason = "AwaitingReplacementSlot"
	// ReasonAbandoningReplacement: the replica being added could not catch
	// up (its node went away, it lost its state or its claim, or it stayed
	// behind past --replica-rebuild-timeout); it is removed from the Raft
	// configuration and retired, then another node is tried.
	ReasonAbandoningReplacement ConditionReason = "AbandoningReplacement"
)

// Reasons of the Diverged condition (and of Degraded while replicas diverge).
const (
	// ReasonDigestMismatch: two replicas published different state digests
	// at the same applied index. The journal the quorum holds is still the
	// authority; the replicas' backing state is not the same.
	ReasonDigestMismatch ConditionReason = "DigestMismatch"
	// ReasonDigestsAgree: every replica that published a digest at the
	// latest compared index published the same value.
	ReasonDigestsAgree ConditionReason = "DigestsAgree"
	// ReasonDigestsPending: no two replicas published digests at one index yet.
	ReasonDigestsPending ConditionReason = "DigestsPending"
)

// ReplicaReleased is True once the replica host closed the worker of a
// VolumeReplica being deleted and unpublished its backing volume. Its
// identity-bound acknowledgement is status.releasedClaimUID.
const ReplicaReleased ConditionType = "Released"
