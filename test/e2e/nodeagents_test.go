package e2e

// The storage half of the product installed by config/overlays/local: the
// NODE DaemonSet on every node and both CSI drivers registered with every
// kubelet. TestMain waits for it next to the manager, so every suite runs on
// the whole shipped product and a broken NODE Pod fails the run at once.

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cellfleet/cellfleet/test/e2e/cluster"
)

const (
	storageNamespace = "cellfleet-storage"
	nodeDaemonSet    = "cellfleet-node"
	// The two drivers csi-node registers with the kubelet itself
	// (docs/decisions/0005): the node-local backing driver and the
	// replicated one.
	localDriver      = "local.storage.eric.dev"
	replicatedDriver = "replicated.storage.eric.dev"
)

// nodeAgentsTimeout bounds the NODE DaemonSet's rollout after the apply: five
// images per node, the registration and the first readiness probes.
const nodeAgentsTimeout = 3 * time.Minute

// waitNodeAgents waits until the NODE DaemonSet runs a Ready Pod on every
// node and every node's CSINode lists both drivers.
func waitNodeAgents(ctx context.Context, c *cluster.Cluster) error {
	deadline := time.Now().Add(nodeAgentsTimeout)
	for {
		missing, err := nodeAgentsMissing(ctx, c)
		if err == nil && missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the NODE DaemonSet %s/%s is not ready on every node within %v: %s (err %v)",
				storageNamespace, nodeDaemonSet, nodeAgentsTimeout, missing, err)
		}
		time.Sleep(time.Second)
	}
}

// nodeAgentsMissing says what is not there yet ("" when everything is).
func nodeAgentsMissing(ctx context.Context, c *cluster.Cluster) (string, error) {
	ds := &appsv1.DaemonSet{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: storageNamespace, Name: nodeDaemonSet}, ds); err != nil {
		return "no DaemonSet", fmt.Errorf("get DaemonSet %s/%s: %w", storageNamespace, nodeDaemonSet, err)
	}
	var nodes corev1.NodeList
	if err := c.Client.List(ctx, &nodes); err != nil {
		return "nodes unknown", fmt.Errorf("list nodes: %w", err)
	}
	st := ds.Status
	if st.ObservedGeneration < ds.Generation || st.DesiredNumberScheduled != int32(len(nodes.Items)) ||
		st.NumberReady != st.DesiredNumberScheduled || st.UpdatedNumberScheduled != st.DesiredNumberScheduled {
		return fmt.Sprintf("%d nodes, DaemonSet status %+v", len(nodes.Items), st), nil
	}
	for _, n := range nodes.Items {
		cn := &storagev1.CSINode{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: n.Name}, cn); err != nil {
			return "CSINode " + n.Name + " missing", nil
		}
		var names []string
		for _, d := range cn.Spec.Drivers {
			names = append(names, d.Name)
		}
		for _, want := range []string{localDriver, replicatedDriver} {
			if !slices.Contains(names, want) {
				return fmt.Sprintf("CSINode %s lists %v, not %s", n.Name, names, want), nil
			}
		}
	}
	return "", nil
}
