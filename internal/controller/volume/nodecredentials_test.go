package volume_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// syncNode runs the per-node credentials reconcile of node.
func (fx *fixture) syncNode(node string) {
	fx.t.Helper()
	if _, err := fx.r.NodeCredentials().Reconcile(fx.ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: node}}); err != nil {
		fx.t.Fatalf("per-node credentials of %s: %v", node, err)
	}
}

// nodeGrant is what node's per-node Role grants: the Secret names, or nil
// when the node has no Role; it fails the test when the ServiceAccount or
// binding does not match the Role's presence.
func (fx *fixture) nodeGrant(node string) []string {
	fx.t.Helper()
	key := client.ObjectKey{Namespace: fx.ns, Name: storagev1alpha1.NodeCredentialsName(node)}
	role, sa, rb := &rbacv1.Role{}, &corev1.ServiceAccount{}, &rbacv1.RoleBinding{}
	errRole, errSA, errRB := env.Client.Get(fx.ctx, key, role), env.Client.Get(fx.ctx, key, sa), env.Client.Get(fx.ctx, key, rb)
	if apierrors.IsNotFound(errRole) {
		if !apierrors.IsNotFound(errSA) || !apierrors.IsNotFound(errRB) {
			fx.t.Fatalf("node %s has no Role but its ServiceAccount (%v) or RoleBinding (%v) remains", node, errSA, errRB)
		}
		return nil
	}
	if errRole != nil || errSA != nil || errRB != nil {
		fx.t.Fatalf("per-node credentials of %s: role %v, serviceaccount %v, binding %v", node, errRole, errSA, errRB)
	}
	if len(rb.Subjects) != 1 || rb.Subjects[0].Name != key.Name || rb.Subjects[0].Namespace != fx.ns || rb.RoleRef.Name != key.Name {
		fx.t.Fatalf("binding of %s = %+v, want the Role bound to ServiceAccount %s only", node, rb, key)
	}
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Verbs, []string{"get"}) || !slices.Equal(role.Rules[0].Resources, []string{"secrets"}) {
		fx.t.Fatalf("role of %s = %+v, want one rule: get secrets by name", node, role.Rules)
	}
	return role.Rules[0].ResourceNames
}

// onNode is the sorted `<replica>-tls` names of the replicas on node.
func onNode(vrs []storagev1alpha1.VolumeReplica, node string) []string {
	var out []string
	for _, vr := range vrs {
		if vr.Spec.Node == node {
			out = append(out, vr.Name+"-tls")
		}
	}
	slices.Sort(out)
	return out
}

func TestNodeRoleListsExactlyTheNodesReplicas(t *testing.T) {
	fx := newFixture(t)
	nodes := []string{fx.node("a", "", true), fx.node("b", "", true), fx.node("c", "", true)}
	v1, v2 := fx.volume(3), fx.volume(2)
	fx.converge(v1.Name)
	fx.converge(v2.Name)
	all := func() []storagev1alpha1.VolumeReplica { return append(fx.replicas(v1.Name), fx.replicas(v2.Name)...) }
	for _, n := range nodes {
		fx.syncNode(n)
	}
	vrs := all()
	for _, n := range nodes {
		if got, want := fx.nodeGrant(n), onNode(vrs, n); !slices.Equal(got, want) {
			t.Errorf("after placement the Role of %s grants %v, want exactly %v", n, got, want)
		}
	}

	// A replica of v2 goes (a replacement's last step or a deletion): its
	// node's Role loses its Secret and keeps v1's.
	var gone storagev1alpha1.VolumeReplica
	for _, vr := range fx.replicas(v2.Name) {
		gone = vr
		break
	}
	removeReplica(fx, &gone)
	fx.syncNode(gone.Spec.Node)
	vrs = all()
	if got, want := fx.nodeGrant(gone.Spec.Node), onNode(vrs, gone.Spec.Node); !slices.Equal(got, want) || slices.Contains(got, gone.Name+"-tls") {
		t.Errorf("after %s went the Role of %s grants %v, want exactly %v", gone.Name, gone.Spec.Node, got, want)
	}

	// Its node's last replica goes: the ServiceAccount, Role and binding go,
	// each delete bound to the UID read.
	for _, vr := range vrs {
		if vr.Spec.Node == gone.Spec.Node {
			removeReplica(fx, &vr)
		}
	}
	before := len(fx.rec.recorded())
	fx.syncNode(gone.Spec.Node)
	if got := fx.nodeGrant(gone.Spec.Node); got != nil {
		t.Errorf("node %s hosts no replica and its Role still grants %v", gone.Spec.Node, got)
	}
	deletes := 0
	for _, w := range fx.rec.recorded()[before:] {
		if w.op == "delete" {
			deletes++
			if w.uid == "" {
				t.Errorf("%s carried no UID precondition", w)
			}
		}
	}
	if deletes != 3 {
		t.Errorf("%d deletes removed the credentials of %s, want 3 (binding, Role, ServiceAccount)", deletes, gone.Spec.Node)
	}
}

// removeReplica deletes a VolumeReplica outright (its finalizers dropped),
// as the end of a replacement or of a volume's teardown leaves it.
func removeReplica(fx *fixture, vr *storagev1alpha1.VolumeReplica) {
	fx.t.Helper()
	cur := &storagev1alpha1.VolumeReplica{}
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(vr), cur); err != nil {
		fx.t.Fatal(err)
	}
	cur.Finalizers = nil
	if err := env.Client.Update(fx.ctx, cur); err != nil {
		fx.t.Fatal(err)
	}
	if err := env.Client.Delete(fx.ctx, cur); err != nil && !apierrors.IsNotFound(err) {
		fx.t.Fatal(err)
	}
}
