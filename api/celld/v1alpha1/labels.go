package v1alpha1

// Labels, annotations, finalizers and scheduling gates of the celld.eric.dev
// API, by the names docs/fleet-operator.md uses. Everything the operator
// persists besides the objects it renders is named here: the capacity history
// in the reservation annotation, the replacement handoff record on its victim
// Pod (docs/fleet-operator.md, "The replacement handoff"), and the
// served-disk mark on a member Pod (docs/decisions/0004-served-disk-mark.md).
// The one other thing it persists is the per-member record in the fleet's
// status (CelldFleetStatus.Members).
const (
	// LabelFleet carries the fleet's name on everything the operator renders
	// and on the members' Pods and claims.
	LabelFleet = "celld.eric.dev/fleet"

	// LabelFleetUID carries the fleet's UID on each member's claim. A claim at
	// a member's name without it belongs to someone else and is never adopted.
	LabelFleetUID = "celld.eric.dev/fleet-uid"

	// LabelReplacementFleet is the private index of a replacement hold: the
	// original fleet UID on a Pod prepared for the handoff. It still finds the
	// hold after the ordinary fleet label or owner reference changes.
	LabelReplacementFleet = "celld.eric.dev/replacement-fleet"

	// AnnotationReplacement holds the handoff record on the victim Pod: fleet
	// UID, the original claim's UID and resourceVersion, and the phase.
	AnnotationReplacement = "celld.eric.dev/replacement"

	// FinalizerReplacement holds a replaced member's terminating Pod, and so
	// its StatefulSet name, until its original claim's deletion is accepted.
	FinalizerReplacement = "celld.eric.dev/replacement-hold"

	// AnnotationServedOn is the operator's mark on a PersistentFleet member
	// Pod that has been Ready on a disk created for it: the UID of that
	// claim. It tells a disk that once served its member (a corrupt disk
	// there is replaced after the delay) from one that never did (a new disk
	// would not help). See docs/decisions/0004-served-disk-mark.md.
	AnnotationServedOn = "celld.eric.dev/served-on"

	// FinalizerFleet keeps a deleted fleet until its compute and then its
	// disks are gone.
	FinalizerFleet = "celld.eric.dev/fleet"

	// AnnotationRestartToken is the Pod-template annotation that carries
	// spec.maintenance.restartToken, so changing it rolls the members.
	AnnotationRestartToken = "celld.eric.dev/restart-token"

	// AnnotationReservationState is the reservation annotation. It holds only
	// the capacity policy's history and is absent when there is none.
	AnnotationReservationState = "celld.eric.dev/state"

	// SchedulingGateZoneRelease holds an Ordered Bucket member's Pod until the
	// operator has pinned it to the zone its ordinal selects.
	SchedulingGateZoneRelease = "celld.eric.dev/zone-release"

	// SchedulingGateLauncher is the scheduling gate of the v0.0.5 launcher.
	// Migration leaves gated Pods to the rolling update, which replaces them.
	SchedulingGateLauncher = "celld.eric.dev/launcher"
)

// Capacity policy inputs, written on the CelldFleet by whatever measures the
// fleet's load (the operator has no client for celld or for metrics).
const (
	// AnnotationCapacityRecommendation is the capacity estimator's current
	// recommendation, as JSON {"id": "<unique per recommendation>",
	// "replicas": N}. ScaleOut and Automatic apply it (within
	// spec.capacity's bounds and step), Shadow only records it. A
	// recommendation is applied once: the policy asks again with a new id.
	AnnotationCapacityRecommendation = "celld.eric.dev/capacity-recommendation"

	// AnnotationSurvivorCapacity is survivor-capacity evidence, as JSON
	// {"replicas": N, "observedAt": "<RFC 3339>"}: the measured load fits on N
	// members. Automatic and External contraction to M members needs fresh
	// evidence with N <= M, else the fleet reports CapacityUncertain.
	AnnotationSurvivorCapacity = "celld.eric.dev/survivor-capacity"
)
