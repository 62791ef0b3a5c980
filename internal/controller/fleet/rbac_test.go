package fleet_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/cellfleet/cellfleet/internal/testenv"
)

// TestGeneratedFleetRBACIsAsNarrowAsDocumented reads the RBAC generated from this
// package's markers and checks it against docs/fleet-operator.md ("Deployment
// notes"): the ClusterRole covers only the fleet API and StorageClass reads;
// the namespaced Role grants Pod and claim deletion, Pod update, Service update
// and budget update, and no claim creation; nothing touches PersistentVolumes,
// Nodes or VolumeAttachments.
func TestGeneratedFleetRBACIsAsNarrowAsDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "fleet", "role.yaml"))
	if err != nil {
		t.Fatalf("the fleet RBAC must be generated (make manifests): %v", err)
	}
	var cluster rbacv1.ClusterRole
	var role rbacv1.Role
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break
		}
		b, _ := yamlRoundTrip(doc)
		switch doc["kind"] {
		case "ClusterRole":
			mustUnmarshal(t, b, &cluster)
		case "Role":
			mustUnmarshal(t, b, &role)
		}
	}
	if len(cluster.Rules) == 0 || len(role.Rules) == 0 {
		t.Fatal("config/rbac/fleet/role.yaml must hold the fleet ClusterRole and the namespaced Role")
	}
	allowedCluster := map[string]bool{"celld.eric.dev": true, "storage.k8s.io": true}
	for _, r := range cluster.Rules {
		for _, g := range r.APIGroups {
			if !allowedCluster[g] {
				t.Errorf("the ClusterRole may cover only the fleet API and StorageClasses; it grants group %q %v", g, r.Resources)
			}
			if g == "storage.k8s.io" && (!slices.Equal(r.Resources, []string{"storageclasses"}) || slices.ContainsFunc(r.Verbs, isWrite)) {
				t.Errorf("the ClusterRole may only read StorageClasses; it grants %v on %v", r.Verbs, r.Resources)
			}
		}
	}
	forbidden := []string{"persistentvolumes", "nodes", "volumeattachments"}
	grants := func(rules []rbacv1.PolicyRule, resource, verb string) bool {
		for _, r := range rules {
			if slices.Contains(r.Resources, resource) && (slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
				return true
			}
		}
		return false
	}
	for _, res := range forbidden {
		for _, v := range []string{"get", "list", "watch"} {
			if grants(cluster.Rules, res, v) || grants(role.Rules, res, v) {
				t.Errorf("the operator must have no %s access (%s)", res, v)
			}
		}
	}
	// Every namespaced grant is one the operator uses; anything else (a
	// wildcard, claim creation, a patch it never issues, Secrets, ...) widens
	// the operator's reach beyond what "Deployment notes" lists.
	roleAllows := map[string][]string{
		"pods":                   {"get", "list", "watch", "update", "delete"},
		"persistentvolumeclaims": {"get", "list", "watch", "delete"},
		"services":               {"get", "list", "watch", "create", "update"},
		"serviceaccounts":        {"get", "list", "watch"},
		"statefulsets":           {"get", "list", "watch", "create", "update", "delete"},
		"deployments":            {"get", "list", "watch", "create", "update", "delete"},
		"poddisruptionbudgets":   {"get", "list", "watch", "create", "update"},
		"networkpolicies":        {"get", "list", "watch", "create", "update"},
		"events":                 {"create", "patch"},
	}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			allowed, known := roleAllows[res]
			if !known {
				t.Errorf("the namespaced Role grants %v on %s, which the operator does not need", r.Verbs, res)
				continue
			}
			for _, v := range r.Verbs {
				if !slices.Contains(allowed, v) {
					t.Errorf("the namespaced Role grants %s on %s; docs/fleet-operator.md (RBAC) allows only %v", v, res, allowed)
				}
			}
		}
	}
	clusterAllows := map[string][]string{
		"celldfleets":              {"get", "list", "watch", "update"},
		"celldfleets/status":       {"get", "update"},
		"celldfleets/finalizers":   {"update"},
		"celldstoragereservations": {"get", "list", "watch", "create", "update"},
		"storageclasses":           {"get", "list", "watch"},
	}
	for _, r := range cluster.Rules {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				if !slices.Contains(clusterAllows[res], v) {
					t.Errorf("the ClusterRole grants %s on %s; it covers only the fleet API and StorageClass reads", v, res)
				}
			}
		}
	}
	if grants(role.Rules, "persistentvolumeclaims", "create") || grants(cluster.Rules, "persistentvolumeclaims", "create") {
		t.Error("the Role must not grant claim creation: the StatefulSet creates claims")
	}
	for _, need := range []struct{ resource, verb string }{
		{"pods", "delete"}, {"persistentvolumeclaims", "delete"}, {"pods", "update"},
		{"services", "update"}, {"poddisruptionbudgets", "update"},
	} {
		if !grants(role.Rules, need.resource, need.verb) {
			t.Errorf("the namespaced Role must grant %s %s", need.verb, need.resource)
		}
		if grants(cluster.Rules, need.resource, need.verb) {
			t.Errorf("%s %s must be granted in the fleet namespace only, not cluster-wide", need.verb, need.resource)
		}
	}
}

func isWrite(v string) bool { return v != "get" && v != "list" && v != "watch" }
