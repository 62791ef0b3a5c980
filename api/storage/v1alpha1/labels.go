package v1alpha1

// Labels, finalizers and Secret keys shared by the volume controller, the
// replica host and the node plugin. One definition here so the three
// binaries never disagree on a name.

const (
	// LabelVolume names the ReplicatedVolume an object belongs to: its
	// VolumeReplicas, backing claims, replica Services and Secrets.
	LabelVolume = "storage.eric.dev/volume"
	// LabelNode names the node whose replica host uses the object (a
	// VolumeReplica, its claim and its Secret).
	LabelNode = "storage.eric.dev/node"
	// LabelReplica names the VolumeReplica an object serves.
	LabelReplica = "storage.eric.dev/replica"

	// FinalizerVolumeTeardown holds a ReplicatedVolume until its replicas,
	// claims, Services and Secrets are removed in order.
	FinalizerVolumeTeardown = "storage.eric.dev/volume-teardown"
	// FinalizerReplicaRelease holds a VolumeReplica being deleted until its
	// host acknowledged the release (status.releasedClaimUID) and the manager
	// removed the replica's claim, Service and Secret.
	FinalizerReplicaRelease = "storage.eric.dev/replica-release"
	// FinalizerBackingUse is the replica host's protection of a backing claim
	// in use (docs/replica-engine.md, "Kubernetes mode"). Only the manager
	// removes it, after the identity-bound release acknowledgement.
	FinalizerBackingUse = "storage.eric.dev/backing-use"

	// AnnotationUnavailableSince is the volume controller's durable record,
	// on a VolumeReplica, of when it first found the replica's node or host
	// gone (RFC 3339). The replacement delay counts from it, so a restarted
	// manager does not start the delay again; it is removed when the node
	// and host are back.
	AnnotationUnavailableSince = "storage.eric.dev/unavailable-since"
	// AnnotationMembershipRemoved records, on a replaced VolumeReplica, the
	// membership generation whose Raft removal committed. Only a replica
	// carrying it may be torn down without its host's release
	// acknowledgement (its node is gone): it no longer holds any vote.
	AnnotationMembershipRemoved = "storage.eric.dev/membership-removed"
	// AnnotationReplacementAbandoned marks, on a replacement VolumeReplica
	// that could not catch up, the controller's decision to abandon it (the
	// value says why): it is removed from the Raft configuration (if it was
	// ever added) and retired, and another node is tried.
	AnnotationReplacementAbandoned = "storage.eric.dev/replacement-abandoned"
	// AnnotationAbandonedReplacements lists, on a lost VolumeReplica, its
	// abandoned replacements as comma-separated `<replica>@<node>`: the next
	// attempt picks another node and an index above theirs (a replica name,
	// hence a Raft server ID, is never used twice).
	AnnotationAbandonedReplacements = "storage.eric.dev/abandoned-replacements"

	// AnnotationSourceClaimUID records, on a ReplicatedVolume whose name does
	// not carry it (the provisioner's pvc-<uid>), the UID of the source claim
	// the volume controller first saw. A claim of the same name with another
	// UID is another claim.
	AnnotationSourceClaimUID = "storage.eric.dev/source-claim-uid"
	// AnnotationOrphanedSince is the volume controller's durable record, on a
	// ReplicatedVolume, of when it first found the source claim gone and no
	// PersistentVolume holding the volume (RFC 3339); the orphan grace period
	// counts from it, so a restarted manager does not start it again.
	AnnotationOrphanedSince = "storage.eric.dev/orphaned-since"

	// AnnotationDigestRequested asks the replica host of a VolumeReplica
	// for a state digest now, past its digest interval: any value of at
	// most 63 characters (a timestamp, a scenario's name). The host answers
	// once per value, when the applied index has been still for its quiet
	// period (a digest never runs while writes flow), and echoes the value
	// in status.digest.request. The qualification sets it after stopping
	// its writers.
	AnnotationDigestRequested = "storage.eric.dev/digest-requested"

	// AnnotationSelectedNode binds a WaitForFirstConsumer claim to a node, as
	// the scheduler would; the local provisioner provisions there.
	AnnotationSelectedNode = "volume.kubernetes.io/selected-node"
)

// Keys of the volume trust Secrets.
const (
	// SecretKeyCACert is the volume CA's certificate (PEM), in every Secret.
	SecretKeyCACert = "ca.crt"
	// SecretKeyCAKey is the volume CA's private key: only in the CA Secret in
	// the manager's namespace.
	SecretKeyCAKey = "ca.key"
	// SecretKeyCert and SecretKeyKey are a replica's certificate and key
	// (SAN: its replica Service's DNS name), in its replica Secret.
	SecretKeyCert = "tls.crt"
	SecretKeyKey  = "tls.key"
	// SecretKeyPeerToken is the bearer token replicas present to each other.
	SecretKeyPeerToken = "peer-token"
	// SecretKeyMountToken is the bearer token mount owners present to
	// replicas; replicas hold it to verify them.
	SecretKeyMountToken = "mount-token"
)
