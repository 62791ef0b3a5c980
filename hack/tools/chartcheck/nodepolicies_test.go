package chartcheck

import (
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// nodePolicies are the NODE ServiceAccount's admission policies, by the
// suffix of their names: its token exchange
// (docs/decisions/0007-per-node-credentials.md) and its writes
// (docs/decisions/0008-node-write-restriction.md).
var nodePolicies = []string{"-node-token-exchange", "-node-writes"}

// The NODE policies are rendered by the chart and by every kustomize overlay
// that installs the NODE DaemonSet, each with the same match, variables and
// validations, matching the NODE ServiceAccount that overlay or release
// names, failing closed and bound with Deny. The policies' behaviour itself
// is tested on a real API server in internal/replica/kubehost.
func TestChartAndKustomizeShipTheSameNodePolicies(t *testing.T) {
	policies := func(t *testing.T, where string, objs []object, nodeSA string) map[string]admissionregistrationv1.ValidatingAdmissionPolicySpec {
		t.Helper()
		pols, binds := ofKind(objs, "ValidatingAdmissionPolicy"), ofKind(objs, "ValidatingAdmissionPolicyBinding")
		if len(pols) != len(nodePolicies) || len(binds) != len(nodePolicies) {
			t.Fatalf("%s: want exactly the NODE policies %v with one binding each, got %v and %v", where, nodePolicies, pols, binds)
		}
		bound := map[string]admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{}
		for _, o := range binds {
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			o.decode(t, &b)
			bound[b.Spec.PolicyName] = b.Spec
		}
		specs := map[string]admissionregistrationv1.ValidatingAdmissionPolicySpec{}
		for _, o := range pols {
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			o.decode(t, &p)
			if b, ok := bound[p.Name]; !ok || len(b.ValidationActions) != 1 || b.ValidationActions[0] != admissionregistrationv1.Deny {
				t.Errorf("%s: policy %s is bound by %+v, want one binding with Deny", where, p.Name, b)
			}
			if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("%s: policy %s must fail closed", where, p.Name)
			}
			want := "request.userInfo.username == 'system:serviceaccount:" + storageNamespace + ":" + nodeSA + "'"
			if len(p.Spec.MatchConditions) != 1 || p.Spec.MatchConditions[0].Expression != want {
				t.Errorf("%s: policy %s matches %+v, want only %s", where, p.Name, p.Spec.MatchConditions, want)
			}
			for _, suffix := range nodePolicies {
				if strings.HasSuffix(p.Name, suffix) {
					specs[suffix] = p.Spec
				}
			}
		}
		if len(specs) != len(nodePolicies) {
			t.Fatalf("%s: policies %v, want one named *%s each", where, pols, strings.Join(nodePolicies, ", *"))
		}
		return specs
	}
	chart := policies(t, "the chart", render(t), nodeName)
	for _, dir := range []string{"config/overlays/local", "config/overlays/dev", "config/overlays/production"} {
		kust := policies(t, dir, kustomizeBuild(t, dir), "cellfleet-node")
		for _, suffix := range nodePolicies {
			k, c := kust[suffix], chart[suffix]
			if !reflect.DeepEqual(k.MatchConstraints, c.MatchConstraints) {
				t.Errorf("%s's *%s matches other requests than the chart's:\n%+v\n%+v", dir, suffix, k.MatchConstraints, c.MatchConstraints)
			}
			if !reflect.DeepEqual(k.Variables, c.Variables) {
				t.Errorf("%s's *%s variables differ from the chart's:\n%+v\n%+v", dir, suffix, k.Variables, c.Variables)
			}
			if !reflect.DeepEqual(k.Validations, c.Validations) {
				t.Errorf("%s's *%s validations differ from the chart's:\n%+v\n%+v", dir, suffix, k.Validations, c.Validations)
			}
		}
	}
}
