package fleet

// The member Pod template shared by both profiles: the celld container as
// docs/fleet-operator.md ("The celld runtime contract") describes it (ports
// 8080/8081, readiness on celld's health endpoint and no liveness probe,
// because a restart destroys nothing and celld's own gate decides readiness), a
// restricted security context, zone spread and hostname anti-affinity (required
// in Strict, preferred in Relaxed), and the restart token as an annotation so
// that changing it rolls the members through the ordinary rolling update
// (docs/fleet-operator.md, "Rollout and scaling").

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// Durability values of CELLD_DURABILITY.
const (
	durabilityFleet  = "fleet"
	durabilityBucket = "bucket"
)

func renderPodTemplate(f *celldv1alpha1.CelldFleet) corev1.PodTemplateSpec {
	annotations := map[string]string{}
	if m := f.Spec.Maintenance; m != nil && m.RestartToken != "" {
		annotations[celldv1alpha1.AnnotationRestartToken] = m.RestartToken
	}
	grace := int64(terminationGrace(f))
	pod := corev1.PodSpec{
		ServiceAccountName:            f.Spec.ServiceAccountName,
		TerminationGracePeriodSeconds: &grace,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To(int64(65532)),
			RunAsGroup:     ptr.To(int64(65532)),
			FSGroup:        ptr.To(int64(65532)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers:                []corev1.Container{renderContainer(f)},
		TopologySpreadConstraints: renderZoneSpread(f),
		Affinity:                  renderAffinity(f),
	}
	if !persistent(f) {
		pod.Volumes = []corev1.Volume{{Name: dataVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	if ordered(f) {
		pod.SchedulingGates = []corev1.PodSchedulingGate{{Name: celldv1alpha1.SchedulingGateZoneRelease}}
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: objectLabels(f), Annotations: annotations},
		Spec:       pod,
	}
}

func terminationGrace(f *celldv1alpha1.CelldFleet) int32 {
	if l := f.Spec.Lifecycle; l != nil && l.TerminationGraceSeconds > 0 {
		return l.TerminationGraceSeconds
	}
	return 45
}

func shutdownSeconds(f *celldv1alpha1.CelldFleet) int32 {
	if l := f.Spec.Lifecycle; l != nil && l.ShutdownSeconds > 0 {
		return l.ShutdownSeconds
	}
	return 30
}

func renderContainer(f *celldv1alpha1.CelldFleet) corev1.Container {
	return corev1.Container{
		Name:  containerName,
		Image: f.Spec.RuntimeImage,
		Ports: []corev1.ContainerPort{
			{Name: appPortName, ContainerPort: appPort, Protocol: corev1.ProtocolTCP},
			{Name: peerPortName, ContainerPort: peerPort, Protocol: corev1.ProtocolTCP},
		},
		Env: renderEnv(f),
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: healthPath, Port: intstr.FromInt32(appPort), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds: 5, FailureThreshold: 3, TimeoutSeconds: 2, SuccessThreshold: 1,
		},
		Resources:    renderResources(f),
		VolumeMounts: []corev1.VolumeMount{{Name: dataVolumeName, MountPath: workDir}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// renderEnv is the CELLD_* environment of the contract, then the user's.
func renderEnv(f *celldv1alpha1.CelldFleet) []corev1.EnvVar {
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
	}
	var env []corev1.EnvVar
	if persistent(f) {
		env = append(env,
			fieldEnv("CELLD_NODE", "metadata.name"),
			corev1.EnvVar{Name: "CELLD_ADVERTISE", Value: fmt.Sprintf("$(CELLD_NODE).%s.%s.svc:%d", peersName(f), f.Namespace, peerPort)},
			corev1.EnvVar{Name: "CELLD_DURABILITY", Value: durabilityFleet})
	} else {
		env = append(env,
			fieldEnv("CELLD_NODE", "metadata.uid"),
			fieldEnv("CELLD_ADVERTISE", "status.podIP"),
			corev1.EnvVar{Name: "CELLD_DURABILITY", Value: durabilityBucket})
	}
	env = append(env,
		corev1.EnvVar{Name: "CELLD_BUCKET", Value: "s3://" + f.Spec.Storage.Bucket},
		corev1.EnvVar{Name: "CELLD_WATCH", Value: workDir},
		corev1.EnvVar{Name: "CELLD_ADDR", Value: fmt.Sprintf(":%d", appPort)},
		corev1.EnvVar{Name: "CELLD_INTERNAL_ADDR", Value: fmt.Sprintf(":%d", peerPort)},
		corev1.EnvVar{Name: "CELLD_SHUTDOWN_TOTAL_MS", Value: strconv.Itoa(int(shutdownSeconds(f)) * 1000)},
	)
	if r := f.Spec.Storage.Region; r != "" {
		env = append(env, corev1.EnvVar{Name: "AWS_REGION", Value: r})
	}
	for _, e := range f.Spec.Env {
		env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	return env
}

func renderResources(f *celldv1alpha1.CelldFleet) corev1.ResourceRequirements {
	var rr corev1.ResourceRequirements
	if x := f.Spec.Execution; x != nil {
		rr.Requests = resourceList(x.Requests)
		rr.Limits = resourceList(x.Limits)
	}
	return rr
}

func resourceList(c *celldv1alpha1.ComputeResources) corev1.ResourceList {
	if c == nil || (c.CPU == nil && c.Memory == nil) {
		return nil
	}
	out := corev1.ResourceList{}
	set := func(name corev1.ResourceName, q *resource.Quantity) {
		if q != nil {
			out[name] = q.DeepCopy()
		}
	}
	set(corev1.ResourceCPU, c.CPU)
	set(corev1.ResourceMemory, c.Memory)
	return out
}

func strict(f *celldv1alpha1.CelldFleet) bool {
	return f.Spec.Placement == nil || f.Spec.Placement.Mode != celldv1alpha1.PlacementRelaxed
}

func renderZoneSpread(f *celldv1alpha1.CelldFleet) []corev1.TopologySpreadConstraint {
	when := corev1.DoNotSchedule
	if !strict(f) {
		when = corev1.ScheduleAnyway
	}
	return []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       zoneTopologyKey,
		WhenUnsatisfiable: when,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: selectorLabels(f)},
	}}
}

func renderAffinity(f *celldv1alpha1.CelldFleet) *corev1.Affinity {
	term := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: selectorLabels(f)},
		TopologyKey:   hostnameTopologyKey,
	}
	a := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
	if strict(f) {
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = []corev1.PodAffinityTerm{term}
	} else {
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: term}}
	}
	if p := f.Spec.Placement; p != nil && len(p.Zones) > 0 {
		a.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: zoneTopologyKey, Operator: corev1.NodeSelectorOpIn, Values: append([]string(nil), p.Zones...),
			}}}},
		}}
	}
	return a
}
