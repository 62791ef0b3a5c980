package kubehost_test

// The NODE identity's writes against a real kube-apiserver evaluating
// config/node/node-write-policy.yaml (docs/decisions/0008): a host token
// bound to node A's Pod writes A's VolumeReplica status, EndpointSlices and
// claims, and is denied B's, whatever RBAC's namespace-wide grants allow.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/replica/kubehost"
	"github.com/cellfleet/cellfleet/internal/testenv/nodestack"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// asTokenClient is a controller-runtime client authenticated by token
// alone, as the host's is.
func asTokenClient(t *testing.T, token string) client.Client {
	t.Helper()
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// claimOn creates, as the volume controller and the scheduler would, a
// backing claim selected for node, carrying the backing-use finalizer its
// host adds.
func claimOn(t *testing.T, s *nodestack.Stack, name, node string) {
	t.Helper()
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS, Finalizers: []string{storagev1alpha1.FinalizerBackingUse},
			Labels:      map[string]string{storagev1alpha1.LabelReplica: name, storagev1alpha1.LabelNode: node},
			Annotations: map[string]string{storagev1alpha1.AnnotationSelectedNode: node}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}},
	}
	if err := env.Client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cur := &corev1.PersistentVolumeClaim{}
		if env.Client.Get(t.Context(), client.ObjectKeyFromObject(c), cur) == nil {
			cur.Finalizers = nil
			_ = env.Client.Update(t.Context(), cur)
			_ = env.Client.Delete(t.Context(), cur)
		}
	})
}

// sliceOf is replica's EndpointSlice as a host on labelled would write it,
// with one endpoint on endpointNode.
func sliceOf(s *nodestack.Stack, replica, labelled, endpointNode string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: replica, Namespace: s.NS, Labels: map[string]string{
			discoveryv1.LabelServiceName: replica, discoveryv1.LabelManagedBy: kubehost.ManagedBy,
			storagev1alpha1.LabelReplica: replica, storagev1alpha1.LabelNode: labelled}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{nodestack.PodIP(0)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To(endpointNode)}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("replica"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(40000))}},
	}
}

// acknowledgeRelease writes a releasedClaimUID into replica's status as c,
// the acknowledgement the manager releases a claim on.
func acknowledgeRelease(t *testing.T, c client.Client, ns, replica string) error {
	t.Helper()
	vr := &storagev1alpha1.VolumeReplica{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: replica}, vr); err != nil {
		t.Fatal(err)
	}
	vr.Status.ReleasedClaimUID = "forged-" + replica
	return c.Status().Update(t.Context(), vr)
}

// deniedByNodeWrites is whether err is the node-write policy's denial.
func deniedByNodeWrites(err error) bool {
	return isDenied(err) && strings.Contains(err.Error(), "cellfleet-node-writes")
}

func TestNodeIdentityWritesOnlyItsOwnNodesReplicaStatusSlicesAndClaims(t *testing.T) {
	s := nodestack.New(t, env, hostBinary, "kh-nw-system")
	a, b := s.AddNode("kh-nw-a"), s.AddNode("kh-nw-b")
	replicaOn(t, s, "nw-r0", a.Name)
	replicaOn(t, s, "nw-r1", b.Name)
	claimOn(t, s, "nw-r0", a.Name)
	claimOn(t, s, "nw-r1", b.Name)
	bSlice := sliceOf(s, "nw-r1", b.Name, b.Name)
	if err := env.Client.Create(t.Context(), bSlice); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(t.Context(), bSlice) })
	onA := asTokenClient(t, s.NodeToken(a.Name))

	// The policy is in force once the API server's policy informer has it:
	// until then RBAC alone admits every write below.
	poll.Until(t, 30*time.Second, "the host on "+a.Name+" denied a release acknowledgement in "+b.Name+"'s replica status", func() error {
		if err := acknowledgeRelease(t, onA, s.NS, "nw-r1"); !deniedByNodeWrites(err) {
			return fmt.Errorf("err = %v, want the node-write policy's denial", err)
		}
		return nil
	})

	denied := []struct {
		what  string
		write func() error
	}{
		{"update " + b.Name + "'s EndpointSlice to point at " + a.Name, func() error {
			cur := &discoveryv1.EndpointSlice{}
			if err := onA.Get(t.Context(), client.ObjectKeyFromObject(bSlice), cur); err != nil {
				return err
			}
			cur.Endpoints[0].NodeName, cur.Labels[storagev1alpha1.LabelNode] = ptr.To(a.Name), a.Name
			return onA.Update(t.Context(), cur)
		}},
		{"delete " + b.Name + "'s EndpointSlice", func() error {
			cur := &discoveryv1.EndpointSlice{}
			if err := onA.Get(t.Context(), client.ObjectKeyFromObject(bSlice), cur); err != nil {
				return err
			}
			return onA.Delete(t.Context(), cur, client.Preconditions{UID: &cur.UID})
		}},
		{"create an EndpointSlice labelled " + b.Name, func() error {
			return onA.Create(t.Context(), sliceOf(s, "nw-forged-b", b.Name, b.Name))
		}},
		{"create an EndpointSlice labelled " + a.Name + " with an endpoint on " + b.Name, func() error {
			return onA.Create(t.Context(), sliceOf(s, "nw-forged-mixed", a.Name, b.Name))
		}},
		{"strip the backing-use finalizer of " + b.Name + "'s claim", func() error {
			cur := &corev1.PersistentVolumeClaim{}
			if err := onA.Get(t.Context(), client.ObjectKey{Namespace: s.NS, Name: "nw-r1"}, cur); err != nil {
				return err
			}
			controllerutil.RemoveFinalizer(cur, storagev1alpha1.FinalizerBackingUse)
			return onA.Update(t.Context(), cur)
		}},
		{"move its own claim to " + b.Name, func() error {
			cur := &corev1.PersistentVolumeClaim{}
			if err := onA.Get(t.Context(), client.ObjectKey{Namespace: s.NS, Name: "nw-r0"}, cur); err != nil {
				return err
			}
			cur.Annotations[storagev1alpha1.AnnotationSelectedNode] = b.Name
			return onA.Update(t.Context(), cur)
		}},
	}
	for _, d := range denied {
		if err := d.write(); !deniedByNodeWrites(err) {
			t.Errorf("the host on %s could %s: err = %v, want the node-write policy's denial", a.Name, d.what, err)
		}
	}

	// Its own node's objects: every write the host makes.
	if err := acknowledgeRelease(t, onA, s.NS, "nw-r0"); err != nil {
		t.Errorf("the host on %s acknowledges a release in its own replica's status: %v", a.Name, err)
	}
	aSlice := sliceOf(s, "nw-r0", a.Name, a.Name)
	if err := onA.Create(t.Context(), aSlice); err != nil {
		t.Fatalf("the host on %s creates its replica's EndpointSlice: %v", a.Name, err)
	}
	aSlice.Ports[0].Port = ptr.To(int32(40001))
	if err := onA.Update(t.Context(), aSlice); err != nil {
		t.Errorf("the host on %s updates its replica's EndpointSlice: %v", a.Name, err)
	}
	if err := onA.Delete(t.Context(), aSlice, client.Preconditions{UID: &aSlice.UID}); err != nil {
		t.Errorf("the host on %s deletes its replica's EndpointSlice: %v", a.Name, err)
	}
	own := &corev1.PersistentVolumeClaim{}
	if err := onA.Get(t.Context(), client.ObjectKey{Namespace: s.NS, Name: "nw-r0"}, own); err != nil {
		t.Fatal(err)
	}
	controllerutil.RemoveFinalizer(own, storagev1alpha1.FinalizerBackingUse)
	if err := onA.Update(t.Context(), own); err != nil {
		t.Errorf("the host's identity on %s updates its node's claim: %v", a.Name, err)
	}
	controllerutil.AddFinalizer(own, storagev1alpha1.FinalizerBackingUse)
	if err := onA.Update(t.Context(), own); err != nil {
		t.Errorf("the host on %s adds the backing-use finalizer to its replica's claim: %v", a.Name, err)
	}

	// A NODE token bound to no Pod carries no node: it writes nothing.
	unbound, err := exchange(t, adminClientset(t), s.NS, nodestack.NodeServiceAccount, 3600)
	if err != nil {
		t.Fatal(err)
	}
	if err := acknowledgeRelease(t, asTokenClient(t, unbound), s.NS, "nw-r0"); !deniedByNodeWrites(err) ||
		!strings.Contains(err.Error(), "bound to a Pod on a node") {
		t.Errorf("a NODE token without node claims wrote a replica's status: err = %v, want the policy's denial", err)
	}
}
