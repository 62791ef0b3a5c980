package kubehost_test

// Node liveness with real hosts (docs/decisions/0011-node-leases.md): the
// stack plays kubelet's readiness probe honestly here, from each host's own
// /readyz, so a probe that counted every worker would take the node's
// replica-host container out of service as kubelet would.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
	"github.com/cellfleet/cellfleet/internal/testenv/nodestack"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// probeReadiness plays kubelet's readiness probe of every node's
// replica-host container from its /readyz until ctx ends.
func (fx *fixture) probeReadiness(ctx context.Context) {
	httpc := &http.Client{Timeout: time.Second}
	go func() {
		for ctx.Err() == nil {
			for _, n := range fx.Nodes {
				ready := false
				if resp, err := httpc.Get("http://" + n.Status + "/readyz"); err == nil {
					ready = resp.StatusCode == http.StatusOK
					resp.Body.Close()
				}
				p := &corev1.Pod{}
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: fx.ns, Name: nodestack.NodePodName(n.Name)}, p); err != nil {
					continue
				}
				if len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready == ready {
					continue
				}
				p.Status.Phase = corev1.PodRunning
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: volume.ReplicaHostContainer, Ready: ready}}
				_ = env.Client.Status().Update(ctx, p)
			}
			time.Sleep(500 * time.Millisecond) // kubelet's probe period, shortened
		}
	}()
}

// A host one of whose workers lost its journal (ReplicaStateLost) renews
// its Lease: past the replacement delay only the lost replica is replaced;
// the healthy replica of another volume on the same node is not.
func TestAHostWithALostWorkerKeepsItsOtherReplicas(t *testing.T) {
	fx := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	fx.ctx = ctx
	fx.ReplacementDelay = time.Minute
	for i := range 4 {
		fx.AddNode(fmt.Sprintf("kh-live-%c", 'a'+i))
	}
	fx.StartControllerOnFreePorts()
	fx.StartHosts("-lease-duration", "10s")
	fx.probeReadiness(ctx)
	a, b := fx.volume("khlivea", 3), fx.volume("khliveb", 3)
	fx.ProvisionClaims(a.Name, 3)
	fx.ProvisionClaims(b.Name, 3)
	poll.Until(t, 2*time.Minute, "both volumes Healthy", func() error {
		if err := fx.healthy(a.Name)(); err != nil {
			return err
		}
		return fx.healthy(b.Name)()
	})
	// A node hosting a follower of a and a replica of b.
	var lost, kept storagev1alpha1.VolumeReplica
	for _, va := range fx.replicas(a.Name) {
		for _, vb := range fx.replicas(b.Name) {
			if va.Spec.Node == vb.Spec.Node && va.Status.Role == storagev1alpha1.RoleFollower && lost.Name == "" {
				lost, kept = va, vb
			}
		}
	}
	if lost.Name == "" {
		t.Fatal("no node hosts a follower of one volume and a replica of the other")
	}
	n := fx.NodeNamed(lost.Spec.Node)
	claim := &corev1.PersistentVolumeClaim{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: fx.ns, Name: lost.Spec.BackingClaimName}, claim); err != nil {
		t.Fatal(err)
	}
	fx.StopHost(n)
	if err := os.RemoveAll(filepath.Join(n.ConsumerRoot, claim.Spec.VolumeName, "journal")); err != nil {
		t.Fatal(err)
	}
	fx.RestartHost(n)
	lostAt := time.Now()
	t.Logf("the journal of %s on %s removed; %s of the other volume is on the same node", lost.Name, n.Name, kept.Name)

	poll.Until(t, time.Minute, "the replica reports ReplicaStateLost", func() error {
		for _, vr := range fx.replicas(a.Name) {
			if vr.Name == lost.Name && meta.IsStatusConditionTrue(vr.Status.Conditions, storagev1alpha1.ReplicaStateLost.String()) {
				return nil
			}
		}
		return fmt.Errorf("%s does not report ReplicaStateLost yet", lost.Name)
	})
	// Past the delay (and a Lease duration), with the controller watching:
	// the healthy replica of b on that node must never be replaced.
	replaced := func(volumeName, name string) bool {
		for _, vr := range fx.replicas(volumeName) {
			if vr.Spec.Replaces == name {
				return true
			}
		}
		return false
	}
	for time.Since(lostAt) < fx.ReplacementDelay+30*time.Second {
		if replaced(b.Name, kept.Name) {
			t.Fatalf("%s, healthy on node %s whose host renews its Lease, was replaced because %s on the same node lost its state",
				kept.Name, n.Name, lost.Name)
		}
		vr := &storagev1alpha1.VolumeReplica{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: fx.ns, Name: kept.Name}, vr); err == nil {
			if since := vr.Annotations[storagev1alpha1.AnnotationUnavailableSince]; since != "" {
				t.Fatalf("%s recorded unavailable since %s while its host renews its Lease", kept.Name, since)
			}
		}
		time.Sleep(time.Second) // polling a condition that must stay false for the whole window
	}
	if !replaced(a.Name, lost.Name) {
		t.Errorf("the lost replica %s was not replaced; Replacing %+v", lost.Name,
			meta.FindStatusCondition(fx.getVolume(a.Name).Status.Conditions, storagev1alpha1.VolumeReplacing.String()))
	}
	if l := fx.hostLease(n.Name); l == nil || l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > 10*time.Second {
		t.Errorf("the host of %s does not renew its Lease: %+v", n.Name, l)
	}
}

// hostLease is the Lease the host of node renews, or nil.
func (fx *fixture) hostLease(node string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: storagev1alpha1.HostLeaseName(node)}, l); err != nil {
		return nil
	}
	return l
}
