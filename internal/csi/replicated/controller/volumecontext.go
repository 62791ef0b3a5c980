package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/mountowner/api"
)

// The volume context is what NodeStageVolume later receives (the PV's
// volumeAttributes): the replicas' worker endpoints and the capacity. It is
// written once, when the volume first is Ready, so it is the mount's first
// endpoint list; the mount follows "not coordinator, try X" answers from the
// workers themselves when membership later changes (docs/replica-engine.md,
// "Client (for the FUSE mount owner)").
//
// Each replica's address is its replica Service, as the volume controller
// lists it in the other replicas' spec.peers (the Service DNS name is also
// its certificate's SAN). A replica nobody lists, the only one of a
// one-replica volume, is addressed by the convention the peers follow: its
// Service shares the VolumeReplica's name, `<name>.<namespace>.svc`.

// volumeContext builds the context from the volume's VolumeReplicas.
func (c *Controller) volumeContext(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume) (map[string]string, error) {
	eps, err := c.endpoints(ctx, rv.Name)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(eps)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode endpoints of %s: %v", rv.Name, err)
	}
	return map[string]string{
		replicated.ContextEndpoints:     string(raw),
		replicated.ContextCapacityBytes: strconv.FormatInt(rv.Spec.Capacity.Value(), 10),
	}, nil
}

// endpoints lists the workers of a volume, ordered by replica name.
func (c *Controller) endpoints(ctx context.Context, volume string) ([]api.Endpoint, error) {
	var list storagev1alpha1.VolumeReplicaList
	if err := c.reader.List(ctx, &list, client.InNamespace(c.namespace)); err != nil {
		return nil, status.Errorf(codes.Unavailable, "list VolumeReplicas of %s in %s: %v", volume, c.namespace, err)
	}
	var mine []storagev1alpha1.VolumeReplica
	listed := map[string]storagev1alpha1.ReplicaPeer{}
	for _, vr := range list.Items {
		if vr.Spec.VolumeName != volume {
			continue
		}
		mine = append(mine, vr)
		for _, p := range vr.Spec.Peers {
			listed[p.Name] = p
		}
	}
	if len(mine) == 0 {
		return nil, status.Errorf(codes.Aborted, "volume %s reports Ready but has no VolumeReplica in namespace %s yet; retry", volume, c.namespace)
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Name < mine[j].Name })
	eps := make([]api.Endpoint, 0, len(mine))
	for _, vr := range mine {
		host, port := fmt.Sprintf("%s.%s.svc", vr.Name, vr.Namespace), vr.Spec.Port
		if p, ok := listed[vr.Name]; ok {
			host, port = p.Address, p.Port
		}
		eps = append(eps, api.Endpoint{ID: vr.Name, Address: net.JoinHostPort(host, strconv.Itoa(int(port))), ServerName: host})
	}
	return eps, nil
}
