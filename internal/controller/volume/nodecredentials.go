package volume

// Per-node credentials (docs/decisions/0007-per-node-credentials.md). Every
// NODE Pod runs as the one ServiceAccount cellfleet-node, which may read no
// Secret. For each node hosting at least one replica the controller keeps,
// in the storage namespace, a ServiceAccount cellfleet-node-<node>, a Role
// granting get on exactly the `<replica>-tls` Secrets of that node's
// replicas (by resourceNames) and its RoleBinding. The node's replica host
// exchanges its node-bound token for a short-lived token of that
// ServiceAccount (TokenRequest; the token-exchange ValidatingAdmissionPolicy
// admits only the caller's own node's name), so a host reads its own
// replicas' Secrets and nobody else's.
//
// The objects are reconciled per node, from the VolumeReplicas labelled with
// it (the volume controller's cache already watches them): placement,
// replacement and deletion of a replica all change that list. A node with
// no replica left loses all three, each delete bound to the UID read. A
// replica being deleted still counts: its host may still be closing it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// NodeCredentialsManager is the managed-by label value of the per-node
// ServiceAccounts, Roles and RoleBindings: an object at one of their names
// without it is someone else's and is left alone.
const NodeCredentialsManager = "cellfleet-volume-controller"

// ManagedByLabel is the well-known managed-by label.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// NodeCredentials reconciles the per-node ServiceAccount, Role and
// RoleBinding of one node (the request's name).
type NodeCredentials struct {
	client    client.Client // writes, and cached lists of VolumeReplicas
	reader    client.Reader // uncached gets of the three objects (no list or watch on them)
	namespace string
	log       *slog.Logger
}

// NodeCredentials returns the per-node credentials reconciler sharing r's
// clients and storage namespace.
func (r *Reconciler) NodeCredentials() *NodeCredentials {
	return &NodeCredentials{client: r.client, reader: r.reader, namespace: r.namespace, log: r.log}
}

// setupWithManager runs it on every change of a VolumeReplica, keyed by the
// replica's node.
func (n *NodeCredentials) setupWithManager(mgr ctrl.Manager) error {
	byNode := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		vr, ok := obj.(*storagev1alpha1.VolumeReplica)
		if !ok || vr.Namespace != n.namespace || vr.Spec.Node == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: vr.Spec.Node}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodecredentials").
		Watches(&storagev1alpha1.VolumeReplica{}, byNode).
		Complete(n)
}

// Reconcile converges the credentials of node req.Name.
func (n *NodeCredentials) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := req.Name
	secrets, err := n.nodeSecrets(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(secrets) == 0 {
		return ctrl.Result{}, n.remove(ctx, node)
	}
	return ctrl.Result{}, n.ensure(ctx, node, secrets)
}

// nodeSecrets is the sorted `<replica>-tls` names of node's replicas.
func (n *NodeCredentials) nodeSecrets(ctx context.Context, node string) ([]string, error) {
	list := &storagev1alpha1.VolumeReplicaList{}
	if err := n.client.List(ctx, list, client.InNamespace(n.namespace), client.MatchingLabels{storagev1alpha1.LabelNode: node}); err != nil {
		return nil, fmt.Errorf("list replicas of node %s: %w", node, err)
	}
	var out []string
	for i := range list.Items {
		if list.Items[i].Spec.Node == node {
			out = append(out, replicaSecretName(list.Items[i].Name))
		}
	}
	slices.Sort(out)
	return out, nil
}

func (n *NodeCredentials) meta(node string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: storagev1alpha1.NodeCredentialsName(node), Namespace: n.namespace,
		Labels: map[string]string{ManagedByLabel: NodeCredentialsManager, storagev1alpha1.LabelNode: node}}
}

func managedHere(obj metav1.Object, node string) bool {
	return obj.GetLabels()[ManagedByLabel] == NodeCredentialsManager && obj.GetLabels()[storagev1alpha1.LabelNode] == node
}

// ensure creates or updates the three objects. The Role is written only with
// a non-empty resourceNames list: an empty one would grant every Secret.
func (n *NodeCredentials) ensure(ctx context.Context, node string, secrets []string) error {
	if len(secrets) == 0 {
		return errors.New("refusing a per-node Role without resource names: it would grant every Secret of the namespace")
	}
	m := n.meta(node)
	rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: secrets}
	sa := &corev1.ServiceAccount{ObjectMeta: m, AutomountServiceAccountToken: new(bool)}
	role := &rbacv1.Role{ObjectMeta: m, Rules: []rbacv1.PolicyRule{rule}}
	binding := &rbacv1.RoleBinding{ObjectMeta: m,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: m.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: m.Name, Namespace: n.namespace}}}
	if err := n.write(ctx, node, sa, &corev1.ServiceAccount{}, nil); err != nil {
		return err
	}
	if err := n.write(ctx, node, role, &rbacv1.Role{}, func(cur client.Object) bool {
		r := cur.(*rbacv1.Role)
		if len(r.Rules) == 1 && slices.Equal(r.Rules[0].ResourceNames, secrets) && slices.Equal(r.Rules[0].Verbs, rule.Verbs) &&
			slices.Equal(r.Rules[0].Resources, rule.Resources) && slices.Equal(r.Rules[0].APIGroups, rule.APIGroups) {
			return false
		}
		r.Rules = []rbacv1.PolicyRule{rule}
		return true
	}); err != nil {
		return err
	}
	return n.write(ctx, node, binding, &rbacv1.RoleBinding{}, func(cur client.Object) bool {
		b := cur.(*rbacv1.RoleBinding)
		if b.RoleRef != binding.RoleRef {
			// roleRef is immutable: the foreign binding is left for the
			// operator (it is ours by label, so this is a hand edit).
			return false
		}
		if slices.Equal(b.Subjects, binding.Subjects) {
			return false
		}
		b.Subjects = binding.Subjects
		return true
	})
}

// write creates want, or reads the object at its name into cur and, when
// it is this controller's and fix changes it, updates it.
func (n *NodeCredentials) write(ctx context.Context, node string, want, cur client.Object, fix func(client.Object) bool) error {
	kind := fmt.Sprintf("%T", want)
	err := n.client.Create(ctx, want)
	if err == nil {
		n.log.Info("created per-node credentials object", "node", node, "kind", kind, "name", want.GetName())
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s %s/%s for node %s: %w", kind, want.GetNamespace(), want.GetName(), node, err)
	}
	if err := n.reader.Get(ctx, client.ObjectKeyFromObject(want), cur); err != nil {
		return fmt.Errorf("read %s %s/%s of node %s: %w", kind, want.GetNamespace(), want.GetName(), node, err)
	}
	if !managedHere(cur, node) {
		return fmt.Errorf("%s %s/%s exists and is not the per-node credentials of node %s: it is left alone", kind, want.GetNamespace(), want.GetName(), node)
	}
	if fix == nil || !fix(cur) {
		return nil
	}
	if err := n.client.Update(ctx, cur); err != nil {
		return fmt.Errorf("update %s %s/%s of node %s: %w", kind, want.GetNamespace(), want.GetName(), node, err)
	}
	return nil
}

// remove deletes the node's RoleBinding, Role and ServiceAccount (in that
// order: the grant goes first), each bound to the UID read, and only when
// this controller made them. Deleting the ServiceAccount also invalidates
// every token issued for it.
func (n *NodeCredentials) remove(ctx context.Context, node string) error {
	key := client.ObjectKey{Namespace: n.namespace, Name: storagev1alpha1.NodeCredentialsName(node)}
	var errs []error
	for _, obj := range []client.Object{&rbacv1.RoleBinding{}, &rbacv1.Role{}, &corev1.ServiceAccount{}} {
		kind := fmt.Sprintf("%T", obj)
		if err := n.reader.Get(ctx, key, obj); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("read %s %s of node %s: %w", kind, key, node, err))
			}
			continue
		}
		if !managedHere(obj, node) {
			continue
		}
		uid := obj.GetUID()
		if err := n.client.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s of node %s (uid %s): %w", kind, key, node, uid, err))
			continue
		}
		n.log.Info("removed per-node credentials object: the node hosts no replica", "node", node, "kind", kind, "name", key.Name)
	}
	return errors.Join(errs...)
}
