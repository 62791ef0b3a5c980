package fleet

// The StatefulSet of a PersistentFleet (and of an Ordered Bucket fleet), as
// docs/fleet-operator.md ("Profiles", "Disks") gives it: RollingUpdate with
// partition 0, so Kubernetes restarts one member at a time, highest ordinal
// first, waiting for each to be Ready; Parallel Pod management, so growth
// creates a whole run at once; claim retention Retain for scale-in and
// deletion, so every restart, upgrade and scale-in keeps the member's disk; and
// claim templates labelled with the fleet's UID, so a disk is never mistaken
// for another fleet's.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// renderStatefulSet is the fleet's StatefulSet at the given replica count.
func renderStatefulSet(f *celldv1alpha1.CelldFleet, replicas int32) *appsv1.StatefulSet {
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: workloadName(f), Namespace: f.Namespace, Labels: objectLabels(f)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: selectorLabels(f)},
			ServiceName:         peersName(f),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template:            renderPodTemplate(f),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(0))},
			},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
	}
	if persistent(f) {
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{renderClaimTemplate(f)}
	}
	setTemplateHash(&sts.ObjectMeta, sts.Spec.Template, sts.Spec.UpdateStrategy)
	return sts
}

func renderClaimTemplate(f *celldv1alpha1.CelldFleet) corev1.PersistentVolumeClaim {
	size := int64(1)
	if f.Spec.Storage.SizeGiB != nil {
		size = int64(*f.Spec.Storage.SizeGiB)
	}
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: dataVolumeName,
			Labels: map[string]string{
				celldv1alpha1.LabelFleet:    f.Name,
				celldv1alpha1.LabelFleetUID: string(f.UID),
			},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
			StorageClassName: f.Spec.Storage.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(size<<30, resource.BinarySI),
			}},
		},
	}
}

// setTemplateHash records what the operator rendered, so it can tell an
// unchanged fleet (no write) from a changed one without comparing against
// fields the API server defaulted.
func setTemplateHash(meta *metav1.ObjectMeta, parts ...any) {
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[annotationTemplateHash] = hashOf(parts...)
}

func hashOf(parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		b, err := json.Marshal(p)
		if err != nil {
			panic(fmt.Sprintf("hash rendered object: %v", err)) // rendered objects always marshal
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
