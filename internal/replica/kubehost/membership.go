package kubehost

// Membership (docs/decisions/0003 and 0006): the volume controller records
// the one Raft membership change it wants in spec.membership of every
// member; the host whose worker is the volume's coordinator performs it
// through Raft (Worker.AddReplica / RemoveReplica serialise one change at a
// time), only while the worker reports itself healthy (it holds a quorum),
// and reports the outcome with the request's generation in its own
// VolumeReplica's status. A generation it reported Succeeded is never
// performed again; a failed one is retried on a later pass. Every host also
// teaches its worker the routes to all members it can resolve, so a member
// another coordinator added can be dialled after an election.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/replica"
)

// membershipPass runs on every pass of a live replica whose worker runs. It
// returns the members the worker sees and the outcome to report (nil: keep
// the reported one).
func (a *Agent) membershipPass(ctx context.Context, vr *storagev1alpha1.VolumeReplica) ([]string, *storagev1alpha1.MembershipOutcome) {
	w, st, ok := a.host.Worker(key(vr))
	if !ok || w == nil || st.State != replica.ReplicaStateRunning {
		return nil, nil
	}
	peers, _, err := a.resolvePeers(ctx, vr)
	if err != nil {
		a.log.Debug("peer routes not refreshed", "replica", vr.Name, "error", err)
	}
	for _, p := range peers {
		w.KnowPeer(p)
	}
	members, err := w.Members()
	if err != nil {
		a.log.Debug("raft configuration not read", "replica", vr.Name, "error", err)
	}
	slices.Sort(members)
	req := vr.Spec.Membership
	if req == nil || !w.IsCoordinator() || !st.Healthy || performed(vr.Status.Membership, req) {
		return members, nil
	}
	out := &storagev1alpha1.MembershipOutcome{Generation: req.Generation, Operation: req.Operation, Member: req.Member.Name,
		Result: storagev1alpha1.MembershipSucceeded}
	if err := a.perform(ctx, vr, w, req); err != nil {
		out.Result, out.Message = storagev1alpha1.MembershipFailed, truncate(err.Error(), 1024)
		level := slog.LevelWarn
		if errors.Is(err, replica.ErrCatchingUp) { // progress, not a failure: a rebuild takes many passes
			level = slog.LevelInfo
		}
		a.log.Log(ctx, level, "membership change not committed yet; asked again on a later pass", "replica", vr.Name, "volume", vr.Spec.VolumeName,
			"generation", req.Generation, "operation", req.Operation, "member", req.Member.Name, "error", err)
	} else {
		a.log.Info("membership change committed", "replica", vr.Name, "volume", vr.Spec.VolumeName,
			"generation", req.Generation, "operation", req.Operation, "member", req.Member.Name)
		if m, err := w.Members(); err == nil {
			slices.Sort(m)
			members = m
		}
	}
	return members, out
}

// addCatchUpWait bounds how long one pass waits for a non-voter's catch-up:
// the host's passes run one at a time, so a long wait would hold back every
// other replica's status on the node.
const addCatchUpWait = 2 * time.Second

// performed: the host already reported req's generation Succeeded.
func performed(done *storagev1alpha1.MembershipOutcome, req *storagev1alpha1.MembershipChange) bool {
	return done != nil && done.Result == storagev1alpha1.MembershipSucceeded && done.Generation >= req.Generation
}

func (a *Agent) perform(ctx context.Context, vr *storagev1alpha1.VolumeReplica, w *replica.Worker, req *storagev1alpha1.MembershipChange) error {
	switch req.Operation {
	case storagev1alpha1.MembershipAdd:
		p, published, err := a.resolvePeer(ctx, vr.Namespace, req.Member)
		if err != nil {
			return err
		}
		if !published {
			return fmt.Errorf("the EndpointSlice of member %s is not published yet", req.Member.Name)
		}
		return w.AddReplica(p, addCatchUpWait)
	case storagev1alpha1.MembershipRemove:
		if req.Member.Name == vr.Name {
			// A coordinator never removes itself: the controller asks only
			// for a lost replica's removal, and a lost replica is not
			// elected; refusing keeps a misdirected request harmless.
			return fmt.Errorf("refusing to remove the coordinator %s itself", vr.Name)
		}
		return w.RemoveReplica(req.Member.Name)
	}
	return fmt.Errorf("unknown membership operation %q", req.Operation)
}

// resolvePeer is one member as the worker dials it: the address of its
// EndpointSlice (published by its host) and its Service DNS name as SAN.
// published is false while the slice is absent or has no address.
func (a *Agent) resolvePeer(ctx context.Context, namespace string, p storagev1alpha1.ReplicaPeer) (replica.Peer, bool, error) {
	s := &discoveryv1.EndpointSlice{}
	err := a.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: p.Name}, s)
	if apierrors.IsNotFound(err) {
		return replica.Peer{}, false, nil
	}
	if err != nil {
		return replica.Peer{}, false, fmt.Errorf("read EndpointSlice of member %s: %w", p.Name, err)
	}
	if s.Labels[storagev1alpha1.LabelReplica] != p.Name || len(s.Endpoints) == 0 || len(s.Endpoints[0].Addresses) == 0 {
		return replica.Peer{}, false, nil
	}
	return replica.Peer{ID: p.Name, Address: net.JoinHostPort(s.Endpoints[0].Addresses[0], strconv.Itoa(int(p.Port))),
		ServerName: p.Address}, true, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
