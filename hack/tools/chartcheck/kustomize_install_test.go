package chartcheck

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Applies every object of config/overlays/local (the overlay make cluster-up
// installs) to a real kube-apiserver, namespaces and CRDs first, and asks the
// authorizer what its ServiceAccounts may do: the same answers as the chart's.
func TestKustomizeOverlayInstallsOnARealAPIServer(t *testing.T) {
	cfg, _, clientset := startAPIServer(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	objs := kustomizeBuild(t, "config/overlays/local")
	first := map[string]bool{"Namespace": true, "CustomResourceDefinition": true}
	for _, pass := range []bool{true, false} {
		for _, o := range objs {
			if first[o.Kind] != pass {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(o.raw, &u.Object); err != nil {
				t.Fatalf("decode %s: %v", o, err)
			}
			if err := c.Create(t.Context(), u); err != nil {
				t.Errorf("the API server must accept %s from config/overlays/local: %v", o, err)
			}
		}
	}
	checkAccess(t, clientset, "manager", releaseNamespace, managerName, []access{
		{"delete", "", "pods", "celld", true, "force-deletes a stranded member Pod"},
		{"create", "", "persistentvolumes", "", true, "the replicated csi-provisioner sidecar"},
		{"create", "storage.eric.dev", "volumereplicas", storageNamespace, true, "the volume controller"},
		{"list", "storage.eric.dev", "volumereplicas", storageNamespace, true, "the CSI controller"},
		{"create", "coordination.k8s.io", "leases", releaseNamespace, true, "leader election of the manager and both sidecars"},
		{"list", "", "secrets", storageNamespace, false, "Secrets by name only"},
		{"create", "", "serviceaccounts", storageNamespace, true, "the per-node ServiceAccounts"},
		{"create", "rbac.authorization.k8s.io", "roles", storageNamespace, true, "the per-node Roles"},
		{"create", "rbac.authorization.k8s.io", "rolebindings", storageNamespace, true, "the per-node RoleBindings"},
		{"create", "", "persistentvolumeclaims", "celld", false, "the StatefulSet creates fleet claims"},
	})
	checkAccess(t, clientset, "NODE ServiceAccount", storageNamespace, nodeName, []access{
		{"create", "", "persistentvolumes", "", true, "the local csi-provisioner"},
		{"create", "storage.k8s.io", "csistoragecapacities", storageNamespace, true, "its node's capacity"},
		{"get", "", "secrets", storageNamespace, false, "no Secret: the replica host reads its replicas' as its node's ServiceAccount"},
		{"create", "", "serviceaccounts/token", storageNamespace, true, "the per-node token exchange"},
		{"get", "", "secrets", releaseNamespace, false, "never the CA Secrets of the manager's namespace"},
	})
}
