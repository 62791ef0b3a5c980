package chartcheck

import (
	"context"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// What each of cellfleet's ServiceAccounts may do (docs/install.md, "Two
// Deployments"), asked of a real API server's RBAC authorizer. The fleet
// manager's identity holds the fleet operator's rules as
// docs/fleet-operator.md ("Deployment notes") states them and the manager
// binary's own (leader election, events, the metrics endpoint's reviews):
// no PersistentVolume, Node or VolumeAttachment access, no claim creation,
// no claim update outside its fleet namespaces, no Roles or RoleBindings.
// Everything the storage half needs is the storage controller's.

// fleetAccess is what the fleet manager's ServiceAccount may and may not do.
func fleetAccess(r release) []access {
	var cases []access
	for _, ns := range r.fleetNamespaces {
		cases = append(cases,
			access{"delete", "", "pods", ns, true, "force-deletes a stranded member Pod"},
			access{"update", "", "pods", ns, true, "records the replacement handoff"},
			access{"delete", "", "persistentvolumeclaims", ns, true, "deletes a lost member's claim"},
			access{"create", "apps", "statefulsets", ns, true, "renders PersistentFleets"},
			access{"update", "policy", "poddisruptionbudgets", ns, true, "converges fleet budgets"},
			access{"create", "", "persistentvolumeclaims", ns, false, "the StatefulSet creates claims, never the operator"},
			access{"get", "", "secrets", ns, false, "bucket credentials belong to the fleet, not the operator"},
		)
	}
	return append(cases,
		access{"list", "celld.eric.dev", "celldfleets", "", true, "watches fleets cluster-wide"},
		access{"create", "celld.eric.dev", "celldstoragereservations", "", true, "records capacity history"},
		access{"list", "storage.k8s.io", "storageclasses", "", true, "reads StorageClasses"},
		access{"create", "coordination.k8s.io", "leases", releaseNamespace, true, "its own leader election"},
		access{"create", "authentication.k8s.io", "tokenreviews", "", true, "its metrics endpoint authenticates scrapes"},
		access{"delete", "celld.eric.dev", "celldfleets", "", false, "the operator never deletes a fleet"},
		access{"create", "coordination.k8s.io", "leases", "default", false, "leader election only in the release namespace"},
		// The storage half's, never the fleet operator's.
		access{"create", "", "persistentvolumes", "", false, "no PersistentVolume access: the csi-provisioner sidecar is the storage controller's"},
		access{"patch", "", "persistentvolumes", "", false, "no PersistentVolume access: the csi-resizer sidecar is the storage controller's"},
		access{"delete", "", "persistentvolumes", "", false, "no PersistentVolume access"},
		access{"get", "", "persistentvolumes", "", false, "no PersistentVolume access"},
		access{"get", "", "nodes", "", false, "no Node access: the volume controller places replicas"},
		access{"list", "", "nodes", "", false, "no Node access"},
		access{"list", "storage.k8s.io", "volumeattachments", "", false, "no VolumeAttachment access"},
		access{"update", "", "persistentvolumeclaims", "", false, "no claim updates in every namespace (the sidecars')"},
		access{"update", "", "persistentvolumeclaims", "default", false, "no claim updates outside the fleet namespaces"},
		access{"patch", "", "persistentvolumeclaims/status", "default", false, "no claim status (the resizer's)"},
		access{"create", "", "persistentvolumeclaims", r.storageNamespace, false, "no claim creation: backing claims are the volume controller's"},
		access{"delete", "", "persistentvolumeclaims", r.storageNamespace, false, "never a backing claim"},
		access{"delete", "", "pods", r.storageNamespace, false, "never a NODE Pod"},
		access{"create", "rbac.authorization.k8s.io", "roles", r.storageNamespace, false, "no Roles: the per-node Roles are the volume controller's"},
		access{"create", "rbac.authorization.k8s.io", "rolebindings", r.storageNamespace, false, "no RoleBindings"},
		access{"create", "", "serviceaccounts", r.storageNamespace, false, "no per-node ServiceAccounts"},
		access{"create", "storage.eric.dev", "volumereplicas", r.storageNamespace, false, "no VolumeReplicas"},
		access{"get", "storage.eric.dev", "replicatedvolumes", "", false, "no ReplicatedVolumes"},
		access{"get", "", "secrets", releaseNamespace, false, "never the volumes' CA Secrets"},
		access{"get", "", "secrets", r.storageNamespace, false, "never the nodes' Secrets"},
		access{"list", "storage.k8s.io", "csistoragecapacities", "", false, "no capacity reads"},
	)
}

// storageAccess is what the storage controller's ServiceAccount may and may
// not do: the volume controller's, the CSI controller's and the two
// sidecars' rules, and nothing of the fleet operator's.
func storageAccess(r release) []access {
	cases := []access{
		{"create", "", "persistentvolumes", "", true, "the csi-provisioner sidecar"},
		{"delete", "", "persistentvolumes", "", true, "the csi-provisioner sidecar"},
		{"patch", "", "persistentvolumes", "", true, "the csi-resizer sidecar"},
		{"update", "", "persistentvolumeclaims", "default", true, "the csi-provisioner sidecar on any claim of its class"},
		{"patch", "", "persistentvolumeclaims/status", "default", true, "the csi-resizer sidecar"},
		{"list", "", "nodes", "", true, "the volume controller places replicas on nodes"},
		{"create", "storage.eric.dev", "volumereplicas", r.storageNamespace, true, "the volume controller's replicas"},
		{"list", "storage.eric.dev", "volumereplicas", r.storageNamespace, true, "the CSI controller"},
		{"create", "storage.eric.dev", "replicatedvolumes", "", true, "the CSI controller's CreateVolume"},
		{"create", "", "persistentvolumeclaims", r.storageNamespace, true, "the volume controller's backing claims"},
		{"get", "", "secrets", releaseNamespace, true, "the volumes' CA Secrets, in the release namespace only"},
		{"create", "", "serviceaccounts", r.storageNamespace, true, "the per-node ServiceAccounts"},
		{"create", "rbac.authorization.k8s.io", "roles", r.storageNamespace, true, "the per-node Roles"},
		{"create", "rbac.authorization.k8s.io", "rolebindings", r.storageNamespace, true, "the per-node RoleBindings"},
		{"create", "coordination.k8s.io", "leases", releaseNamespace, true, "leader election of the controller and both sidecars"},
		{"create", "authentication.k8s.io", "tokenreviews", "", true, "its metrics endpoint authenticates scrapes"},
		{"list", "", "secrets", r.storageNamespace, false, "Secrets by name only, never listed"},
		{"get", "", "secrets", "", false, "no Secret access cluster-wide"},
		{"create", "rbac.authorization.k8s.io", "roles", releaseNamespace, false, "per-node Roles in the storage namespace only"},
		{"list", "storage.k8s.io", "volumeattachments", "", false, "no VolumeAttachment access"},
		{"list", "celld.eric.dev", "celldfleets", "", false, "fleets are the fleet operator's"},
		{"update", "celld.eric.dev", "celldfleets", "", false, "fleets are the fleet operator's"},
		{"create", "celld.eric.dev", "celldstoragereservations", "", false, "reservations are the fleet operator's"},
	}
	for _, ns := range r.fleetNamespaces {
		cases = append(cases,
			access{"delete", "", "pods", ns, false, "members are the fleet operator's"},
			access{"delete", "", "persistentvolumeclaims", ns, false, "fleet claims are the fleet operator's"},
			access{"create", "apps", "statefulsets", ns, false, "fleet workloads are the fleet operator's"},
		)
	}
	return cases
}

// nodeAccess is what the NODE ServiceAccount may and may not do.
func nodeAccess(r release) []access {
	return []access{
		{"create", "", "persistentvolumes", "", true, "the local csi-provisioner provisions its node's claims"},
		{"update", "", "persistentvolumeclaims", "default", true, "the selected-node handshake on any claim of the local class"},
		{"create", "storage.k8s.io", "csistoragecapacities", r.storageNamespace, true, "publishes its node's capacity"},
		{"get", "apps", "daemonsets", r.storageNamespace, true, "the capacity objects' owner"},
		{"create", "", "serviceaccounts/token", r.storageNamespace, true, "the per-node token exchange (the admission policy narrows it to the caller's node)"},
		{"create", "storage.k8s.io", "csistoragecapacities", "default", false, "capacity only in the storage namespace"},
		{"get", "", "secrets", r.storageNamespace, false, "no Secret: kubelet passes mount Secrets; the replica host reads its replicas' as its node's ServiceAccount"},
		{"create", "", "serviceaccounts/token", "default", false, "token exchange in the storage namespace only"},
		{"get", "", "secrets", releaseNamespace, false, "never the CA Secrets of the release namespace"},
		{"list", "", "nodes", "", false, "node deployment uses NodeGetInfo, not Node objects"},
		{"create", "storage.eric.dev", "volumereplicas", r.storageNamespace, false, "only the storage controller creates replicas"},
	}
}

// checkIdentities asks the authorizer what each ServiceAccount may do.
func checkIdentities(t *testing.T, clientset kubernetes.Interface, r release) {
	t.Helper()
	checkAccess(t, clientset, "fleet manager's ServiceAccount", releaseNamespace, managerName, fleetAccess(r))
	checkAccess(t, clientset, "storage controller's ServiceAccount", releaseNamespace, storageControllerName, storageAccess(r))
	checkAccess(t, clientset, "NODE ServiceAccount", r.storageNamespace, nodeName, nodeAccess(r))
}

// rbacKinds are what installRBAC creates: the identities and their grants.
var rbacKinds = []string{"Namespace", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"}

// installRBAC creates the rendering's namespaces (and any namespace its
// roles name that it does not create, as an installer must), ServiceAccounts,
// roles and bindings on the API server, and waits until the authorizer
// answers from them.
func installRBAC(t *testing.T, c client.Client, clientset kubernetes.Interface, objs []object) {
	t.Helper()
	ctx := t.Context()
	namespaces := map[string]bool{}
	for _, o := range objs {
		if o.Namespace != "" && slices.Contains(rbacKinds, o.Kind) {
			namespaces[o.Namespace] = true
		}
	}
	for ns := range namespaces {
		err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	for _, kind := range rbacKinds {
		for _, o := range ofKind(objs, kind) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(o.raw, &u.Object); err != nil {
				t.Fatalf("decode %s: %v", o, err)
			}
			if err := c.Create(ctx, u); err != nil && !(kind == "Namespace" && apierrors.IsAlreadyExists(err)) {
				t.Fatalf("the API server must accept %s: %v", o, err)
			}
		}
	}
	// The authorizer reads bindings from its informers: wait until it
	// answers for the last binding created before asking it anything.
	last := access{"create", "coordination.k8s.io", "leases", releaseNamespace, true, "leader election"}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, sa := range []string{managerName, storageControllerName} {
			if ok, err := allowed(ctx, clientset, releaseNamespace, sa, last); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		t.Logf("the authorizer did not yet allow both controllers' leader election after 30s (%v); asking anyway", err)
	}
}

// allowed asks the authorizer one question.
func allowed(ctx context.Context, clientset kubernetes.Interface, namespace, name string, a access) (bool, error) {
	review, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + namespace + ":" + name,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}

// Every overlay, installed on a real API server: the fleet manager's
// ServiceAccount may do exactly the fleet operator's part, the storage
// controller's the storage half's, the NODE's its node's.
func TestKustomizeOverlaysGiveEachServiceAccountOnlyItsHalf(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			cfg, _, clientset := startAPIServer(t)
			c, err := client.New(cfg, client.Options{})
			if err != nil {
				t.Fatalf("client: %v", err)
			}
			installRBAC(t, c, clientset, kustomizeBuild(t, dir))
			checkIdentities(t, clientset, release{[]string{"celld"}, storageNamespace})
		})
	}
}

// The chart's rendering, by default and with two fleet namespaces and
// another storage namespace, installed on a real API server: the same
// answers as the overlays'.
func TestChartGivesEachServiceAccountOnlyItsHalf(t *testing.T) {
	cases := []struct {
		name string
		set  []string
		rel  release
	}{
		{name: "defaults", rel: release{[]string{"celld"}, storageNamespace}},
		{name: "two fleet namespaces and another storage namespace", set: []string{"--set", "fleetNamespaces={celld,b}", "--set", "storageNamespace=st"},
			rel: release{[]string{"celld", "b"}, "st"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, clientset := startAPIServer(t)
			c, err := client.New(cfg, client.Options{})
			if err != nil {
				t.Fatalf("client: %v", err)
			}
			installRBAC(t, c, clientset, render(t, tc.set...))
			checkIdentities(t, clientset, tc.rel)
		})
	}
}
