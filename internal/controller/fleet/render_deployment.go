package fleet

// The Deployment of a Bucket fleet. Bucket members have no disks (an emptyDir
// at /work, bucket durability), so a Deployment's surge-and-replace rollout is
// safe; maxUnavailable 0 keeps the fleet's capacity during a roll.

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func renderDeployment(f *celldv1alpha1.CelldFleet, replicas int32) *appsv1.Deployment {
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: workloadName(f), Namespace: f.Namespace, Labels: objectLabels(f)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selectorLabels(f)},
			Template: renderPodTemplate(f),
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &one},
			},
		},
	}
	setTemplateHash(&d.ObjectMeta, d.Spec.Template, d.Spec.Strategy)
	return d
}
