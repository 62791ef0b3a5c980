package v1alpha1

// ConditionType is the type of one of a CelldFleet's conditions. Each says one
// independent thing about the fleet.
type ConditionType string

const (
	// ConditionReady is True when every desired member is Ready.
	ConditionReady ConditionType = "Ready"
	// ConditionProgressing is True while the workload is changing: a rollout,
	// a growth run or a contraction step.
	ConditionProgressing ConditionType = "Progressing"
	// ConditionBlocked is True when the operator cannot go on without a
	// change in the cluster or the spec; its reason says which.
	ConditionBlocked ConditionType = "Blocked"
	// ConditionMaintenancePaused is True while spec.maintenance.paused is set.
	ConditionMaintenancePaused ConditionType = "MaintenancePaused"
	// ConditionDeleting is True while a deleted fleet's compute and disks are
	// being removed.
	ConditionDeleting ConditionType = "Deleting"
	// ConditionHealing is True while the operator heals a member that cannot
	// come back on its own: a stranded Pod force-deleted, or a disk replaced.
	// Healing runs whatever other gate is Blocked, so it has its own report.
	ConditionHealing ConditionType = "Healing"
)

// ConditionReason is the machine-readable reason of a condition.
type ConditionReason string

// Reasons of the Ready condition.
const (
	// ReasonMembersReady: every desired member is Ready.
	ReasonMembersReady ConditionReason = "MembersReady"
	// ReasonMembersNotReady: some desired member is not Ready.
	ReasonMembersNotReady ConditionReason = "MembersNotReady"
)

// Reasons of the Progressing condition.
const (
	// ReasonRollingOut: the workload is replacing members on a new template.
	ReasonRollingOut ConditionReason = "RollingOut"
	// ReasonGrowing: members are being added, one run of ordinals at a time.
	ReasonGrowing ConditionReason = "Growing"
	// ReasonContracting: members are being removed, one per step.
	ReasonContracting ConditionReason = "Contracting"
	// ReasonConverged: the workload matches the spec and has rolled out.
	ReasonConverged ConditionReason = "Converged"
)

// Reasons of the Blocked condition.
const (
	// ReasonNotBlocked: nothing stops the operator.
	ReasonNotBlocked ConditionReason = "NotBlocked"
	// ReasonInvalidConfiguration: the spec passed the API server's checks but
	// cannot run (for example a missing ServiceAccount or StorageClass); the
	// workload is left untouched.
	ReasonInvalidConfiguration ConditionReason = "InvalidConfiguration"
	// ReasonInfrastructureBlocked: an object the operator renders exists but
	// differs from what it would create and may not be overwritten (for
	// example a Service someone else changed, or a workload it does not own).
	ReasonInfrastructureBlocked ConditionReason = "InfrastructureBlocked"
	// ReasonStorageIdentityConflict: a claim at a member's name does not carry
	// the fleet's UID label; the operator never adopts another fleet's disk.
	ReasonStorageIdentityConflict ConditionReason = "StorageIdentityConflict"
	// ReasonBucketReserved: another fleet's CelldStorageReservation owns the
	// bucket.
	ReasonBucketReserved ConditionReason = "BucketReserved"
	// ReasonCapacityUncertain: a contraction the capacity policy asked for has
	// no survivor-capacity evidence, so it is not applied.
	ReasonCapacityUncertain ConditionReason = "CapacityUncertain"
	// ReasonMemberUnschedulable: a member has not been placed by the end of
	// the replacement delay and the operator has not replaced it.
	ReasonMemberUnschedulable ConditionReason = "MemberUnschedulable"
	// ReasonRevisionNotReady: a member has not become Ready on its current
	// revision within the replacement delay, after it was Ready on an earlier
	// one. It waits on its image or configuration and keeps its disk.
	ReasonRevisionNotReady ConditionReason = "RevisionNotReady"
)

// Reasons of the MaintenancePaused condition.
const (
	// ReasonPaused: spec.maintenance.paused is set; the workload is frozen.
	ReasonPaused ConditionReason = "Paused"
	// ReasonNotPaused: the operator manages the workload.
	ReasonNotPaused ConditionReason = "NotPaused"
)

// Reasons of the Deleting condition.
const (
	// ReasonNotDeleting: the fleet is not being deleted.
	ReasonNotDeleting ConditionReason = "NotDeleting"
	// ReasonDeletingCompute: the fleet's workload and Pods are being removed.
	ReasonDeletingCompute ConditionReason = "DeletingCompute"
	// ReasonDeletingDisks: compute is gone; the fleet's claims are being
	// deleted.
	ReasonDeletingDisks ConditionReason = "DeletingDisks"
)

// Reasons of the Healing condition.
const (
	// ReasonReplacingMember: a member's disk is being replaced through the
	// replacement handoff.
	ReasonReplacingMember ConditionReason = "ReplacingMember"
	// ReasonForceDeletedStranded: a member Pod left on a node that no longer
	// answers was force-deleted; the member keeps its disk.
	ReasonForceDeletedStranded ConditionReason = "ForceDeletedStranded"
	// ReasonNoMemberToHeal: every member is Ready.
	ReasonNoMemberToHeal ConditionReason = "NoMemberToHeal"
	// ReasonMemberAwaitingReplacement: one member is down and will be
	// replaced at the time the message names (and status.members records as
	// replacementDue) unless it comes back first.
	ReasonMemberAwaitingReplacement ConditionReason = "MemberAwaitingReplacement"
	// ReasonMembersDown: more than one member is down; none is replaced until
	// only one is, since either disk may hold the only copy of some writes.
	ReasonMembersDown ConditionReason = "MembersDown"
	// ReasonMemberWaitingOnConfiguration: the down member waits on its image
	// or configuration (or a scheduling gate); a fresh disk would not help.
	ReasonMemberWaitingOnConfiguration ConditionReason = "MemberWaitingOnConfiguration"
	// ReasonMemberWaitingOnRevision: the down member has never been Ready on
	// its current revision after it was Ready on an earlier one; it keeps its
	// disk (Blocked/RevisionNotReady after the replacement delay).
	ReasonMemberWaitingOnRevision ConditionReason = "MemberWaitingOnRevision"
	// ReasonReplacementWaitingOnScheduler: a member is due for a fresh disk,
	// which waits until the StatefulSet has observed its spec and the
	// scheduler has placed, or found no node for, every other member.
	ReasonReplacementWaitingOnScheduler ConditionReason = "ReplacementWaitingOnScheduler"
	// ReasonDiskNeverServed: the down member runs on a disk created for its
	// current Pod that it has never been Ready on; a fresh disk would not help.
	ReasonDiskNeverServed ConditionReason = "DiskNeverServed"
	// ReasonMemberAwaitingPod: the down member has no live Pod (it is
	// terminating, or the StatefulSet has not recreated it yet); it is judged
	// again on its next Pod.
	ReasonMemberAwaitingPod ConditionReason = "MemberAwaitingPod"
	// ReasonHealingNotApplicable: the fleet has no StatefulSet of its own
	// (a Bucket Deployment, or a fleet whose StatefulSet is not created yet).
	ReasonHealingNotApplicable ConditionReason = "HealingNotApplicable"
)
