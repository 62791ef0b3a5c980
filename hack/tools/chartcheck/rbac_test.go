package chartcheck

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// generatedRules are the rule lists controller-gen wrote from the markers.
type generatedRules struct {
	fleetCluster []rbacv1.PolicyRule // ClusterRole in config/rbac/fleet/role.yaml
	fleetRole    []rbacv1.PolicyRule // Role in config/rbac/fleet/role.yaml
	managerRole  []rbacv1.PolicyRule // Role in config/rbac/manager/role.yaml
	// ClusterRole in config/rbac/manager/role.yaml: the metrics endpoint's
	// TokenReview and SubjectAccessReview.
	managerCluster []rbacv1.PolicyRule
	metricsReader  []rbacv1.PolicyRule // config/rbac/metrics/metrics_reader_role.yaml
}

func loadGeneratedRules(t *testing.T) generatedRules {
	t.Helper()
	var g generatedRules
	fleet := generatedObjects(t, "config", "rbac", "fleet", "role.yaml")
	manager := generatedObjects(t, "config", "rbac", "manager", "role.yaml")
	g.fleetCluster, g.fleetRole = rulesOf(t, fleet, "ClusterRole"), rulesOf(t, fleet, "Role")
	g.managerCluster, g.managerRole = rulesOf(t, manager, "ClusterRole"), rulesOf(t, manager, "Role")
	g.metricsReader = rulesOf(t, generatedObjects(t, "config", "rbac", "metrics", "metrics_reader_role.yaml"), "ClusterRole")
	if g.fleetCluster == nil || g.fleetRole == nil || g.managerRole == nil || g.managerCluster == nil || g.metricsReader == nil {
		t.Fatalf("config/rbac/fleet/role.yaml must hold a ClusterRole and a Role, config/rbac/manager/role.yaml a ClusterRole and a Role, " +
			"config/rbac/metrics/metrics_reader_role.yaml a ClusterRole: run make manifests")
	}
	return g
}

// rulesOf is the rules of the object of kind (Role or ClusterRole) in objs,
// nil when there is none. A Role decodes as a ClusterRole: it has a subset of
// its fields.
func rulesOf(t *testing.T, objs []object, kind string) []rbacv1.PolicyRule {
	t.Helper()
	var rules []rbacv1.PolicyRule
	for _, o := range ofKind(objs, kind) {
		var r rbacv1.ClusterRole
		o.decode(t, &r)
		rules = r.Rules
	}
	return rules
}

// roleKey names a Role or binding by namespace and name.
type roleKey struct{ namespace, name string }

func TestChartRBACIsExactlyTheGeneratedRoles(t *testing.T) {
	want := loadGeneratedRules(t)
	managerSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: managerName, Namespace: releaseNamespace}}
	cases := []struct {
		name            string
		set             []string
		fleetNamespaces []string
	}{
		{name: "defaults", fleetNamespaces: []string{"celld"}},
		{name: "two fleet namespaces", set: []string{"--set", "fleetNamespaces={a,b}"}, fleetNamespaces: []string{"a", "b"}},
		{name: "fleet namespace is the release namespace", set: []string{"--set", "fleetNamespaces={" + releaseNamespace + "}"}, fleetNamespaces: []string{releaseNamespace}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := render(t, tc.set...)

			wantCluster := map[string][]rbacv1.PolicyRule{fleetName: want.fleetCluster, managerName: want.managerCluster, metricsReaderName: want.metricsReader}
			gotCluster := map[string][]rbacv1.PolicyRule{}
			for _, o := range ofKind(objs, "ClusterRole") {
				var cr rbacv1.ClusterRole
				o.decode(t, &cr)
				gotCluster[o.Name] = cr.Rules
			}
			if !sameKeys(keyed(gotCluster), keyed(wantCluster)) {
				t.Fatalf("the chart must render exactly the ClusterRoles %v; got %v", sortedKeys(keyed(wantCluster)), sortedKeys(keyed(gotCluster)))
			}
			for name, rules := range wantCluster {
				if !reflect.DeepEqual(gotCluster[name], rules) {
					t.Errorf("ClusterRole %s must grant exactly the rules of its config/rbac file (seed 002):\n got  %+v\n want %+v", name, gotCluster[name], rules)
				}
			}
			// The scraper binds metrics-reader itself; the chart binds only the
			// manager's two ClusterRoles, to the manager.
			gotCRB := map[string]rbacv1.ClusterRoleBinding{}
			for _, o := range ofKind(objs, "ClusterRoleBinding") {
				var crb rbacv1.ClusterRoleBinding
				o.decode(t, &crb)
				gotCRB[o.Name] = crb
			}
			wantCRB := map[string][]rbacv1.PolicyRule{fleetName: nil, managerName: nil}
			if !sameKeys(keyed(gotCRB), keyed(wantCRB)) {
				t.Fatalf("the chart must render exactly the ClusterRoleBindings %v; got %v", sortedKeys(keyed(wantCRB)), sortedKeys(keyed(gotCRB)))
			}
			for name, crb := range gotCRB {
				if crb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}) || !reflect.DeepEqual(crb.Subjects, managerSubject) {
					t.Errorf("ClusterRoleBinding %s must bind ClusterRole %s to the manager's ServiceAccount only; got roleRef %+v subjects %+v", name, name, crb.RoleRef, crb.Subjects)
				}
			}

			wantRoles := map[roleKey][]rbacv1.PolicyRule{{releaseNamespace, managerName}: want.managerRole}
			for _, ns := range tc.fleetNamespaces {
				wantRoles[roleKey{ns, fleetName}] = want.fleetRole
			}
			gotRoles := map[roleKey][]rbacv1.PolicyRule{}
			for _, o := range ofKind(objs, "Role") {
				var r rbacv1.Role
				o.decode(t, &r)
				gotRoles[roleKey{o.Namespace, o.Name}] = r.Rules
			}
			if !sameKeys(gotRoles, wantRoles) {
				t.Fatalf("the chart must render a manager Role in %s and a fleet Role in each of %v and no other Role; got %v", releaseNamespace, tc.fleetNamespaces, sortedKeys(gotRoles))
			}
			for k, rules := range wantRoles {
				if !reflect.DeepEqual(gotRoles[k], rules) {
					t.Errorf("Role %s/%s must grant exactly the generated rules:\n got  %+v\n want %+v", k.namespace, k.name, gotRoles[k], rules)
				}
			}

			gotBindings := map[roleKey]rbacv1.RoleBinding{}
			for _, o := range ofKind(objs, "RoleBinding") {
				var b rbacv1.RoleBinding
				o.decode(t, &b)
				gotBindings[roleKey{o.Namespace, o.Name}] = b
			}
			if !sameKeys(gotBindings, wantRoles) {
				t.Fatalf("the chart must bind each Role it renders and nothing else; roles %v, bindings %v", sortedKeys(wantRoles), sortedKeys(gotBindings))
			}
			for k, b := range gotBindings {
				if b.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: k.name}) || !reflect.DeepEqual(b.Subjects, managerSubject) {
					t.Errorf("RoleBinding %s/%s must bind Role %s to the manager's ServiceAccount only; got roleRef %+v subjects %+v", k.namespace, k.name, k.name, b.RoleRef, b.Subjects)
				}
			}
		})
	}
}

// Seed 002 spells out what the operator may never do; the generated roles are
// the source of the chart's, so this guards the markers as the chart ships them.
func TestChartRBACIsAsNarrowAsSeed002(t *testing.T) {
	objs := render(t)
	for _, o := range ofKind(objs, "ClusterRole") {
		var cr rbacv1.ClusterRole
		o.decode(t, &cr)
		for _, forbidden := range []string{"persistentvolumes", "nodes", "volumeattachments", "secrets", "*"} {
			if grants(cr.Rules, forbidden, "get") || grants(cr.Rules, forbidden, "list") {
				t.Errorf("ClusterRole %s must not read %s (seed 002: only the fleet API and StorageClass reads)", o.Name, forbidden)
			}
		}
	}
	for _, o := range ofKind(objs, "Role") {
		var r rbacv1.Role
		o.decode(t, &r)
		if grants(r.Rules, "persistentvolumeclaims", "create") {
			t.Errorf("Role %s/%s must not create claims (seed 002: the StatefulSet creates claims)", o.Namespace, o.Name)
		}
		for _, rule := range r.Rules {
			if slices.Contains(rule.Verbs, "*") || slices.Contains(rule.Resources, "*") {
				t.Errorf("Role %s/%s must name its verbs and resources, got wildcard rule %+v", o.Namespace, o.Name, rule)
			}
		}
	}
}

func grants(rules []rbacv1.PolicyRule, resource, verb string) bool {
	for _, r := range rules {
		if (slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
			return true
		}
	}
	return false
}

func sameKeys[V, W any](a map[roleKey]V, b map[roleKey]W) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// keyed turns a map by cluster-scoped name into one by roleKey.
func keyed[V any](m map[string]V) map[roleKey]V {
	out := make(map[roleKey]V, len(m))
	for k, v := range m {
		out[roleKey{name: k}] = v
	}
	return out
}

func sortedKeys[V any](m map[roleKey]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, filepath.Join(k.namespace, k.name))
	}
	slices.Sort(out)
	return out
}

func TestChartCreatesFleetNamespacesOnlyWhenAskedAndKeepsThemOnUninstall(t *testing.T) {
	if ns := ofKind(render(t), "Namespace"); len(ns) != 0 {
		t.Errorf("by default the chart must not own any namespace; got %v", ns)
	}
	created := ofKind(render(t, "--set", "createFleetNamespaces=true", "--set", "fleetNamespaces={a,b}"), "Namespace")
	var names []string
	for _, o := range created {
		names = append(names, o.Name)
		if !strings.Contains(string(o.raw), "helm.sh/resource-policy: keep") {
			t.Errorf("Namespace %s must carry helm.sh/resource-policy: keep so uninstalling never deletes fleets and their disks", o.Name)
		}
	}
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("createFleetNamespaces=true must create exactly the fleet namespaces [a b]; got %v", names)
	}
}
