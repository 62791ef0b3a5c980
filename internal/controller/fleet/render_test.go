package fleet_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

// TestPersistentFleetStatefulSetRendering proves the StatefulSet is rendered as
// docs/fleet-operator.md ("Profiles", "The celld runtime contract") says.
func TestPersistentFleetStatefulSetRendering(t *testing.T) {
	fx := newFixture(t)
	fx.runningFleet(3, func(f *celldv1alpha1.CelldFleet) {
		f.Spec.Maintenance = &celldv1alpha1.Maintenance{RestartToken: "token-1"}
		f.Spec.Env = []celldv1alpha1.EnvVar{{Name: "CELLD_TTL_MS", Value: "30000"}}
	})
	f := fx.fleet()
	s := fx.sts()
	spec := s.Spec
	if spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || spec.UpdateStrategy.RollingUpdate == nil ||
		*spec.UpdateStrategy.RollingUpdate.Partition != 0 {
		t.Errorf("the StatefulSet must roll with RollingUpdate partition 0; got %+v", spec.UpdateStrategy)
	}
	if r := spec.PersistentVolumeClaimRetentionPolicy; r == nil || r.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
		r.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("claim retention must be Retain/Retain; got %+v", r)
	}
	if len(spec.VolumeClaimTemplates) != 1 || spec.VolumeClaimTemplates[0].Labels[celldv1alpha1.LabelFleetUID] != string(f.UID) {
		t.Errorf("the claim template must carry the fleet UID label %s; got %+v", celldv1alpha1.LabelFleetUID, spec.VolumeClaimTemplates)
	}
	for _, n := range []string{"data-f-0", "data-f-1", "data-f-2"} {
		if c, ok := fx.claims()[n]; !ok || c.Labels[celldv1alpha1.LabelFleetUID] != string(f.UID) {
			t.Errorf("claim %s must exist with the fleet UID label", n)
		}
	}
	pod := spec.Template.Spec
	c := pod.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/.well-known/celld/health" ||
		c.ReadinessProbe.HTTPGet.Port.IntValue() != 8080 {
		t.Errorf("readiness must probe GET /.well-known/celld/health on 8080; got %+v", c.ReadinessProbe)
	}
	if c.LivenessProbe != nil {
		t.Error("a member must have no liveness probe: a restart destroys nothing and celld gates its own readiness")
	}
	if sc := c.SecurityContext; sc == nil || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !*sc.RunAsNonRoot ||
		len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("the container must run restricted; got %+v", sc)
	}
	if psc := pod.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("the Pod must use the RuntimeDefault seccomp profile; got %+v", psc)
	}
	if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.DoNotSchedule ||
		pod.TopologySpreadConstraints[0].TopologyKey != "topology.kubernetes.io/zone" {
		t.Errorf("Strict placement must require the zone spread; got %+v", pod.TopologySpreadConstraints)
	}
	if a := pod.Affinity; a == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("Strict placement must require hostname anti-affinity; got %+v", a)
	}
	vars := envOf(c)
	wants := map[string]string{
		"CELLD_ADVERTISE": "$(CELLD_NODE).f-peers." + fx.ns + ".svc:8081", "CELLD_BUCKET": "s3://bucket-" + fx.ns,
		"CELLD_DURABILITY": "fleet", "CELLD_WATCH": "/work", "CELLD_TTL_MS": "30000",
	}
	for k, v := range wants {
		if vars[k].Value != v {
			t.Errorf("env %s must be %q; got %q", k, v, vars[k].Value)
		}
	}
	if e := vars["CELLD_NODE"]; e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("CELLD_NODE must be the Pod name for PersistentFleet; got %+v", e)
	}
	if got := spec.Template.Annotations[celldv1alpha1.AnnotationRestartToken]; got != "token-1" {
		t.Errorf("the restart token must be a Pod-template annotation; got %q", got)
	}
}

// TestRelaxedPlacementPrefersSpread proves Relaxed placement prefers, rather
// than requires, zone spread and hostname anti-affinity.
func TestRelaxedPlacementPrefersSpread(t *testing.T) {
	fx := newFixture(t)
	f := persistentFleet(fx.ns, 3)
	f.Spec.Placement.Mode = celldv1alpha1.PlacementRelaxed
	fx.create(f)
	fx.reconcile()
	pod := fx.sts().Spec.Template.Spec
	if pod.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.ScheduleAnyway {
		t.Errorf("Relaxed placement must prefer the zone spread (ScheduleAnyway); got %s", pod.TopologySpreadConstraints[0].WhenUnsatisfiable)
	}
	aa := pod.Affinity.PodAntiAffinity
	if len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 0 || len(aa.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("Relaxed placement must prefer hostname anti-affinity; got %+v", aa)
	}
}
