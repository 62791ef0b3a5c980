package kubehost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// observation is what one pass learned before the worker runs: the
// conditions the status reports while the worker is not yet hosted.
type observation struct {
	published, admitted *metav1.Condition
	// members and membership come from membership.go; nil keeps what the
	// status reports.
	members    []string
	membership *storagev1alpha1.MembershipOutcome
}

func condition(t storagev1alpha1.ConditionType, ok bool, reason storagev1alpha1.ConditionReason, msg string) *metav1.Condition {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	return &metav1.Condition{Type: t.String(), Status: st, Reason: reason.String(), Message: msg}
}

// run advances a live replica: EndpointSlice first (Raft needs it before
// quorum), then credentials, the claim's protection, the local driver's
// publication of its PV and the bind visible here, the peers' addresses,
// and finally the worker.
func (a *Agent) run(ctx context.Context, vr *storagev1alpha1.VolumeReplica) (observation, error) {
	var obs observation
	if err := a.ensureSlice(ctx, vr); err != nil {
		return obs, err
	}
	files, err := a.creds.refresh(ctx, a.secrets, vr, a.opts.SecretRefresh)
	if err != nil && files == nil {
		obs.admitted = condition(storagev1alpha1.ReplicaAdmitted, false, storagev1alpha1.ReasonAdmissionPending,
			"waiting for the replica's Secret "+secretName(vr.Name)+": "+err.Error())
		return obs, err
	}
	if err != nil { // an outage: keep serving on the credentials we have
		a.log.Warn("credentials not refreshed; serving on the ones held", "replica", vr.Name, "error", err)
	}
	if wk, st, ok := a.host.Worker(key(vr)); ok && st.State != replica.ReplicaStateFailed {
		// Hosted: the worker's own status says the rest; a grown spec
		// capacity is committed by the coordinator's host (grow.go).
		a.reloadCredentials(vr)
		if st.State == replica.ReplicaStateRunning {
			return obs, a.grow(vr, wk)
		}
		return obs, nil
	} else if ok {
		// A failed start (say, its publication timed out) is retried.
		_ = a.host.Remove(key(vr))
		a.digest.forget(key(vr))
	}
	claim, err := a.protectClaim(ctx, vr)
	if err != nil {
		obs.published = condition(storagev1alpha1.ReplicaPublished, false, storagev1alpha1.ReasonAwaitingPublication, err.Error())
		return obs, err
	}
	dataDir, err := a.publish(ctx, vr, claim)
	if err != nil {
		obs.published = condition(storagev1alpha1.ReplicaPublished, false, publishReason(err), err.Error())
		return obs, err
	}
	if ok, err := mountpath.IsMountPoint(mountpath.SelfMountInfo, dataDir); err != nil || !ok {
		obs.published = condition(storagev1alpha1.ReplicaPublished, false, storagev1alpha1.ReasonAwaitingPublication,
			fmt.Sprintf("backing volume %s of claim %s is not yet published at %s in this host's mount namespace", claim.Spec.VolumeName, claim.Name, dataDir))
		return obs, err
	}
	obs.published = condition(storagev1alpha1.ReplicaPublished, true, storagev1alpha1.ReasonPublicationVisible,
		"backing volume "+claim.Spec.VolumeName+" is published at "+dataDir)
	peers, missing, err := a.resolvePeers(ctx, vr)
	if err != nil {
		return obs, err
	}
	if len(missing) > 0 {
		obs.admitted = condition(storagev1alpha1.ReplicaAdmitted, false, storagev1alpha1.ReasonAdmissionPending,
			fmt.Sprintf("waiting for the EndpointSlices of peers %v", missing))
		return obs, nil
	}
	spec := a.workerSpec(vr, claim, dataDir, peers, *files)
	_, cond, err := a.host.Add(spec)
	switch {
	case errors.Is(err, host.ErrExists):
	case err != nil:
		obs.admitted = condition(storagev1alpha1.ReplicaAdmitted, false, storagev1alpha1.ReasonAdmissionPending, err.Error())
		return obs, fmt.Errorf("add worker %s: %w", spec.Key(), err)
	case cond != nil && cond.Condition == host.ConditionUnavailable:
		// Past the worker bound nothing is hosted; the next pass asks again.
		obs.admitted = condition(storagev1alpha1.ReplicaAdmitted, false, storagev1alpha1.ConditionReason(cond.Reason), cond.Message)
		return obs, nil
	}
	if err == nil {
		a.creds.loaded(vr.Name) // the new worker reads the files as they are now
	}
	a.remember(vr)
	a.log.Info("worker admitted", "replica", vr.Name, "volume", vr.Spec.VolumeName, "dataDir", dataDir, "listen", spec.Listen)
	return obs, nil
}

// reloadCredentials hands a hosted worker the files its replica's Secret
// changed since it last loaded them (host/credentials.go): a renewed
// certificate is served from the next connection on, without a restart.
// A failed reload is tried again on the next pass.
func (a *Agent) reloadCredentials(vr *storagev1alpha1.VolumeReplica) {
	if !a.creds.changed(vr.Name) {
		return
	}
	if err := a.host.ReloadCredentials(key(vr)); err != nil {
		a.log.Warn("credentials not reloaded; the worker serves on the ones it has", "replica", vr.Name,
			"volume", vr.Spec.VolumeName, "error", err)
		return
	}
	a.creds.loaded(vr.Name)
}

// workerSpec is the host's spec of a replica. The replica's identity is its
// VolumeReplica name; peers reach it at its Service's DNS name (its SAN).
func (a *Agent) workerSpec(vr *storagev1alpha1.VolumeReplica, claim *corev1.PersistentVolumeClaim, dataDir string,
	peers []replica.Peer, files credentialFiles) host.WorkerSpec {
	listen := net.JoinHostPort(a.opts.PodIP, strconv.Itoa(int(vr.Spec.Port)))
	// The first coordinator commits this as the volume's capacity; the
	// spec's capacity is the volume controller's record of it, the claim's
	// request the fallback for replicas made before that field existed.
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if vr.Spec.Capacity != nil {
		size = *vr.Spec.Capacity
	}
	return host.WorkerSpec{
		Volume: vr.Spec.VolumeName, Replica: vr.Name, Generation: uint64(max(vr.Spec.Generation, 1)),
		Listen: listen, Self: replica.Peer{ID: vr.Name, Address: listen, ServerName: serviceDNSName(vr.Name, vr.Namespace)},
		Peers: peers, Bootstrap: bootstraps(vr), DataDir: dataDir, CapacityBytes: uint64(max(size.Value(), 0)),
		CAFile: files.CA, CertFile: files.Cert, KeyFile: files.Key, TokenFile: files.Token,
		Timing: a.opts.Timing, AwaitDataDir: true,
		// The storage identity the host's history records and checks.
		ClaimUID: string(claim.UID), PV: claim.Spec.VolumeName, Node: a.opts.Node,
	}
}

// bootstraps: the replica whose name sorts first among its group writes the
// initial configuration, so exactly one does (replica names differ only in
// their "-r<i>" suffix). A replacement never does: it joins the existing
// group through the coordinator's AddReplica, and "-r10" sorts before
// "-r2", so the name rule alone would let it found a group of its own.
func bootstraps(vr *storagev1alpha1.VolumeReplica) bool {
	if vr.Spec.Replaces != "" {
		return false
	}
	names := []string{vr.Name}
	for _, p := range vr.Spec.Peers {
		names = append(names, p.Name)
	}
	return slices.Min(names) == vr.Name
}

// serviceDNSName is a replica Service's DNS name, the SAN of its
// certificate (as the volume controller issues it).
func serviceDNSName(service, namespace string) string { return service + "." + namespace + ".svc" }
