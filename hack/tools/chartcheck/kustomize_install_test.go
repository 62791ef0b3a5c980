package chartcheck

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Applies every object of config/overlays/local (the overlay make cluster-up
// installs) to a real kube-apiserver, namespaces and CRDs first, and asks the
// authorizer what its ServiceAccounts may do: the same answers as the chart's
// (identities_test.go).
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
	checkIdentities(t, clientset, release{[]string{"celld"}, storageNamespace})
}
