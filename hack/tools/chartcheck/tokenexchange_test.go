package chartcheck

import (
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// The NODE token-exchange policy (docs/decisions/0007-per-node-credentials.md)
// is rendered by the chart and by every kustomize overlay that installs the
// NODE DaemonSet, with the same validations, matching the NODE ServiceAccount
// that overlay or release names, and bound with Deny. The policy's behaviour
// itself is tested on a real API server in internal/replica/kubehost.
func TestChartAndKustomizeShipTheSameTokenExchangePolicy(t *testing.T) {
	policy := func(t *testing.T, objs []object, nodeSA string) admissionregistrationv1.ValidatingAdmissionPolicySpec {
		t.Helper()
		pols, binds := ofKind(objs, "ValidatingAdmissionPolicy"), ofKind(objs, "ValidatingAdmissionPolicyBinding")
		if len(pols) != 1 || len(binds) != 1 {
			t.Fatalf("want exactly one token-exchange policy and binding, got %v and %v", pols, binds)
		}
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
		pols[0].decode(t, &p)
		binds[0].decode(t, &b)
		if b.Spec.PolicyName != p.Name || len(b.Spec.ValidationActions) != 1 || b.Spec.ValidationActions[0] != admissionregistrationv1.Deny {
			t.Errorf("binding %s = %+v, want policy %s with Deny", b.Name, b.Spec, p.Name)
		}
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("policy %s must fail closed", p.Name)
		}
		want := "request.userInfo.username == 'system:serviceaccount:" + storageNamespace + ":" + nodeSA + "'"
		if len(p.Spec.MatchConditions) != 1 || p.Spec.MatchConditions[0].Expression != want {
			t.Errorf("policy %s matches %+v, want only %s", p.Name, p.Spec.MatchConditions, want)
		}
		return p.Spec
	}
	chart := policy(t, render(t), nodeName)
	for _, dir := range []string{"config/overlays/local", "config/overlays/dev", "config/overlays/production"} {
		kust := policy(t, kustomizeBuild(t, dir), "cellfleet-node")
		if len(kust.Validations) != len(chart.Validations) {
			t.Fatalf("%s's policy has %d validations, the chart's %d", dir, len(kust.Validations), len(chart.Validations))
		}
		for i := range kust.Validations {
			if !reflect.DeepEqual(kust.Validations[i], chart.Validations[i]) {
				t.Errorf("%s's validation %d differs from the chart's:\n%+v\n%+v", dir, i, kust.Validations[i], chart.Validations[i])
			}
		}
	}
}
