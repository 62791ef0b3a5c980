package kubehost_test

// Three real replica-host processes in Kubernetes mode, one per "node",
// against one real kube-apiserver, with the real volume controller running
// in-process and a real local CSI driver per node (internal/testenv/nodestack).
// The hosts ask their node's local driver for each backing volume's
// exclusive publication and wait for the bind in their own mount namespace.
// envtest runs no kubelet, scheduler or local provisioner, so the stack
// plays exactly those parts (NODE Pods reported ready; each backing claim's
// local volume created on its node's driver, its PV bound). Everything else
// (publication, EndpointSlices, Raft, statuses, unpublication, release
// acknowledgements, teardown) is the code under test.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/replica/kubehost"
	"github.com/cellfleet/cellfleet/internal/testenv/nodestack"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

const hosts = 3

// fixture is the package's stack with the helpers its tests share.
type fixture struct {
	*nodestack.Stack
	t   *testing.T
	ctx context.Context
	ns  string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s := nodestack.New(t, env, hostBinary, "kh-system")
	return &fixture{Stack: s, t: t, ctx: s.Ctx, ns: s.NS}
}

func (fx *fixture) replicas(volumeName string) []storagev1alpha1.VolumeReplica {
	return fx.Replicas(volumeName)
}

func (fx *fixture) volume(name string, replicas int32) *storagev1alpha1.ReplicatedVolume {
	fx.t.Helper()
	rv := &storagev1alpha1.ReplicatedVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1alpha1.ReplicatedVolumeSpec{
			AccessMode: storagev1alpha1.AccessReadWriteOnce, Replicas: replicas,
			Capacity: resource.MustParse("64Mi"), BackingStorageClassName: "local-backing",
			Source: storagev1alpha1.ClaimReference{Namespace: "app", Name: name},
		},
	}
	if err := env.Client.Create(fx.ctx, rv); err != nil {
		fx.t.Fatal(err)
	}
	return rv
}

// holderOf is the publication holder a host names for a replica.
func holderOf(replica string) string { return "replica-host/" + replica }

func TestThreeHostsRunAVolumeAndReleaseItOnDeletion(t *testing.T) {
	fx := newFixture(t)
	for i := range hosts {
		fx.AddNode(fmt.Sprintf("kh-node-%c", 'a'+i))
	}
	fx.StartControllerOnFreePorts()
	fx.StartHosts()

	rv := fx.volume("khvol", hosts)

	// EndpointSlices come before any publication: Raft needs them first.
	poll.Until(t, time.Minute, "one EndpointSlice per replica, on its Service, before the claims are bound", func() error {
		l := &discoveryv1.EndpointSliceList{}
		if err := env.Client.List(fx.ctx, l, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
			return err
		}
		if len(l.Items) != hosts {
			return fmt.Errorf("%d EndpointSlices, want %d", len(l.Items), hosts)
		}
		for _, s := range l.Items {
			if s.Labels[discoveryv1.LabelServiceName] != s.Name || s.Labels[discoveryv1.LabelManagedBy] != kubehost.ManagedBy {
				return fmt.Errorf("EndpointSlice %s labels %v", s.Name, s.Labels)
			}
			if len(s.Endpoints) != 1 || len(s.Ports) != 1 || !strings.HasPrefix(s.Endpoints[0].Addresses[0], "198.51.100.") {
				return fmt.Errorf("EndpointSlice %s: %+v %+v", s.Name, s.Endpoints, s.Ports)
			}
		}
		return nil
	})
	for _, vr := range fx.replicas(rv.Name) {
		c := meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaPublished.String())
		if c != nil && c.Status == metav1.ConditionTrue {
			t.Fatalf("replica %s reports Published before its claim is bound: %+v", vr.Name, c)
		}
	}

	fx.ProvisionClaims(rv.Name, hosts)

	poll.Until(t, 2*time.Minute, "one Coordinator and two Followers, all Ready", func() error {
		roles := map[storagev1alpha1.ReplicaRole]int{}
		for _, vr := range fx.replicas(rv.Name) {
			roles[vr.Status.Role]++
			c := meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaReady.String())
			if c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("replica %s not Ready: %+v", vr.Name, c)
			}
			if vr.Status.AppliedIndex < 1 {
				return fmt.Errorf("replica %s reports applied index %d", vr.Name, vr.Status.AppliedIndex)
			}
		}
		if roles[storagev1alpha1.RoleCoordinator] != 1 || roles[storagev1alpha1.RoleFollower] != hosts-1 {
			return fmt.Errorf("roles %v", roles)
		}
		return nil
	})
	poll.Until(t, time.Minute, "the volume Ready and Healthy", func() error {
		cur := &storagev1alpha1.ReplicatedVolume{}
		if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(rv), cur); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, storagev1alpha1.VolumeReady.String())
		if c == nil || c.Status != metav1.ConditionTrue || cur.Status.Robustness != storagev1alpha1.RobustnessHealthy {
			return fmt.Errorf("robustness %q, Ready %+v", cur.Status.Robustness, c)
		}
		return nil
	})
	for _, vr := range fx.replicas(rv.Name) {
		for _, ct := range []storagev1alpha1.ConditionType{storagev1alpha1.ReplicaPublished, storagev1alpha1.ReplicaAdmitted} {
			if c := meta.FindStatusCondition(vr.Status.Conditions, ct.String()); c == nil || c.Status != metav1.ConditionTrue {
				t.Errorf("replica %s: %s is %+v, want True", vr.Name, ct, c)
			}
		}
		if c := meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaStateLost.String()); c == nil || c.Status != metav1.ConditionFalse {
			t.Errorf("replica %s: ReplicaStateLost is %+v, want False", vr.Name, c)
		}
		claim := &corev1.PersistentVolumeClaim{}
		if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Spec.BackingClaimName}, claim); err != nil {
			t.Fatal(err)
		}
		if !containsString(claim.Finalizers, storagev1alpha1.FinalizerBackingUse) {
			t.Errorf("claim %s in use lacks the %s finalizer: %v", claim.Name, storagev1alpha1.FinalizerBackingUse, claim.Finalizers)
		}
	}

	// Each host asked its node's local driver for the publication: the
	// driver's durable record names the host as holder while the worker runs.
	published := fx.checkPublished(rv.Name)

	// Deletion: workers close, the hosts unpublish, acknowledgements are
	// written, then the controller removes everything. The local driver
	// checks, on every unpublication, that no acknowledgement came before it.
	unpublished := fx.guardUnpublication(published)
	claimUIDs := map[string]string{}
	for _, vr := range fx.replicas(rv.Name) {
		claim := &corev1.PersistentVolumeClaim{}
		if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Spec.BackingClaimName}, claim); err != nil {
			t.Fatal(err)
		}
		claimUIDs[vr.Name] = string(claim.UID)
	}
	acks := fx.watchAcks(rv.Name)
	if err := env.Client.Delete(fx.ctx, rv); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 2*time.Minute, "the volume and its replicas, claims, Services, EndpointSlices and Secrets removed", func() error {
		var left []string
		if len(fx.replicas(rv.Name)) > 0 {
			left = append(left, "VolumeReplicas")
		}
		for _, l := range []client.ObjectList{&corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}, &corev1.SecretList{}} {
			if err := env.Client.List(fx.ctx, l, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
				return err
			}
			if meta.LenList(l) > 0 {
				left = append(left, fmt.Sprintf("%T", l))
			}
		}
		// The stack plays the PVC protection controller: claims go.
		claims := &corev1.PersistentVolumeClaimList{}
		if err := env.Client.List(fx.ctx, claims, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
			return err
		}
		for _, c := range claims.Items {
			left = append(left, "claim "+c.Name)
		}
		err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(rv), &storagev1alpha1.ReplicatedVolume{})
		if err == nil {
			left = append(left, "the ReplicatedVolume")
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
	got := acks()
	for name, uid := range claimUIDs {
		if got[name] != uid {
			t.Errorf("replica %s: release acknowledgement %q, want its claim's UID %q (all: %v)", name, got[name], uid, got)
		}
	}
	for i, n := range fx.Nodes {
		if w := workersOn(t, n.Status); w != 0 {
			t.Errorf("host %d still runs %d workers after the volume's deletion", i, w)
		}
	}
	unpublished.check(t)
	fx.checkUnpublished(published)
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// A host past its worker bound hosts nothing more and says so in the
// replica's Admitted condition; once a worker leaves, the waiting replica
// is admitted on a later pass.
func TestAHostPastItsWorkerBoundReportsAdmittedFalse(t *testing.T) {
	fx := newFixture(t)
	fx.AddNode("kh-bound-a")
	fx.StartControllerOnFreePorts()
	fx.StartHosts("-max-workers", "1")
	first := fx.volume("khfirst", 1)
	fx.ProvisionClaims(first.Name, 1)
	ready := func(name string) func() error {
		return func() error {
			vrs := fx.replicas(name)
			if len(vrs) != 1 {
				return fmt.Errorf("%d replicas of %s", len(vrs), name)
			}
			if c := meta.FindStatusCondition(vrs[0].Status.Conditions, storagev1alpha1.ReplicaReady.String()); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("replica %s not Ready: %+v", vrs[0].Name, c)
			}
			return nil
		}
	}
	poll.Until(t, time.Minute, "the first volume's replica Ready", ready(first.Name))
	second := fx.volume("khsecond", 1)
	fx.ProvisionClaims(second.Name, 1)
	poll.Until(t, time.Minute, "the second volume's replica held back with Admitted=False WorkerLimitReached", func() error {
		vrs := fx.replicas(second.Name)
		if len(vrs) != 1 {
			return fmt.Errorf("%d replicas of %s", len(vrs), second.Name)
		}
		vr := vrs[0]
		c := meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaAdmitted.String())
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "WorkerLimitReached" {
			return fmt.Errorf("replica %s: Admitted %+v", vr.Name, c)
		}
		if vr.Status.Role != storagev1alpha1.RoleStopped {
			return fmt.Errorf("replica %s held back reports role %q", vr.Name, vr.Status.Role)
		}
		return nil
	})
	if n := workersOn(t, fx.Nodes[0].Status); n != 1 {
		t.Fatalf("the host runs %d workers, its bound is 1", n)
	}
	if err := env.Client.Delete(fx.ctx, first); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 2*time.Minute, "the second volume's replica admitted and Ready once the first left", ready(second.Name))
}
