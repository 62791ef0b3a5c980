package fleet

// What a workload write changed, said once: the template comparison that
// decides whether a write is due, and the event of each growth run and
// contraction step (docs/fleet-operator.md, Rollout and scaling).

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// templateCurrent says the workload (got) carries the Pod template the
// operator renders (want): the same hash annotation, and every field the
// operator sets holds the rendered value. equality.Semantic.DeepDerivative
// skips the fields the rendered template leaves unset, which the API server
// defaults, and what others add beside the operator's (labels, annotations);
// the hash alone would miss a template edited by hand, which keeps it.
func templateCurrent(got *metav1.ObjectMeta, gotTemplate corev1.PodTemplateSpec, want *metav1.ObjectMeta, wantTemplate corev1.PodTemplateSpec) bool {
	return got.Annotations[annotationTemplateHash] == want.Annotations[annotationTemplateHash] &&
		equality.Semantic.DeepDerivative(wantTemplate, gotTemplate)
}

// statefulSetTemplateCurrent is templateCurrent for a StatefulSet.
func statefulSetTemplateCurrent(got, want *appsv1.StatefulSet) bool {
	return templateCurrent(&got.ObjectMeta, got.Spec.Template, &want.ObjectMeta, want.Spec.Template)
}

// announceStep records a growth run (from, to] or a contraction step that a
// workload write just made: the write happens once per step, so does its
// event.
func (r *Reconciler) announceStep(f *celldv1alpha1.CelldFleet, obs *observation, from, to int32) {
	switch {
	case to > from:
		disks := ""
		if persistent(f) {
			disks = ", on fresh disks"
			if keptDisk(f, obs, from) {
				disks = ", reattaching their kept disks"
			}
		}
		r.event(f, corev1.EventTypeNormal, eventGrowthRun, "Scale", "adding members %s%s (%d to %d members)",
			memberRange(f, from, to), disks, from, to)
	case to < from:
		kept := ""
		if persistent(f) {
			kept = fmt.Sprintf("; its disk %s is kept", claimName(f, to))
		}
		r.event(f, corev1.EventTypeNormal, eventContractionStep, "Scale", "removing member %s (%d to %d members)%s",
			memberName(f, to), from, to, kept)
	}
}

// memberRange names the members of ordinals [from, to).
func memberRange(f *celldv1alpha1.CelldFleet, from, to int32) string {
	if to-from == 1 {
		return memberName(f, from)
	}
	return memberName(f, from) + " to " + memberName(f, to-1)
}
