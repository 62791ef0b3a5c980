package fleet

// Convergence of the workload. The operator owns only the fields it renders
// (replicas, Pod template, update strategy, claim retention); everything else,
// including admission mutations of Pods, is left as the cluster has it. It
// writes only when the template or the replica step differs from what it
// renders, and retries a conflict from a fresh read. A template is compared
// field by field as well as by its hash (templateCurrent): a template edited
// by hand keeps the hash annotation, and is converged back.

import (
	"context"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func (r *Reconciler) convergeStatefulSet(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation, rep *report) (*finding, error) {
	desired := f.Spec.Replicas
	if obs.sts == nil {
		if c := identityConflict(f, obs, desired); c != nil {
			return c, nil
		}
		first := max(runEnd(f, obs, 0, desired), orphanedMembers(f, obs))
		if c := identityConflict(f, obs, first); c != nil {
			return c, nil
		}
		want := renderStatefulSet(f, first)
		if err := controllerutil.SetControllerReference(f, want, r.scheme); err != nil {
			return nil, fmt.Errorf("own StatefulSet: %w", err)
		}
		if err := r.client.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("create StatefulSet %s: %w", want.Name, err)
		}
		obs.sts = want
		rep.progress(celldv1alpha1.ReasonGrowing, "created the StatefulSet with %d of %d members", first, desired)
		r.announceStep(f, obs, 0, first)
		return nil, nil
	}
	sts := obs.sts
	if !metav1.IsControlledBy(sts, f) {
		return blocked(celldv1alpha1.ReasonInfrastructureBlocked,
			"StatefulSet %s exists but is not controlled by this fleet; delete or rename it", sts.Name), nil
	}
	if diff := immutableDiff(f, sts); diff != "" {
		return blocked(celldv1alpha1.ReasonInfrastructureBlocked,
			"StatefulSet %s cannot be converged: %s differs and is immutable; delete the StatefulSet (members keep their disks)", sts.Name, diff), nil
	}
	if podManagementDiffers(sts, renderStatefulSet(f, 0)) {
		return nil, r.recreateStatefulSet(ctx, f, sts, rep)
	}
	cur := obs.applied()
	// A template change is written on its own: growing or contracting in the
	// same write would start a run while a rollout is about to recreate
	// members, which is exactly when a fresh disk can take another's zone.
	templateChanged := !statefulSetTemplateCurrent(sts, renderStatefulSet(f, cur))
	next := cur
	if !templateChanged {
		next = nextStep(cur, desired,
			func() bool { return growthMayProceed(obs, cur) },
			func() int32 { return runEnd(f, obs, cur, desired) },
			statefulSetRolledOut(sts) && r.contractionAllowed(f, cur, desired, rep))
	}
	if next > cur {
		if c := identityConflict(f, obs, max(next, desired)); c != nil {
			return c, nil
		}
	}
	want := renderStatefulSet(f, next)
	if statefulSetUpToDate(sts, want) {
		return nil, nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &appsv1.StatefulSet{}
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(sts), fresh); err != nil {
			return err
		}
		if !metav1.IsControlledBy(fresh, f) {
			return fmt.Errorf("StatefulSet %s changed owner", sts.Name)
		}
		fresh.Spec.Replicas = want.Spec.Replicas
		fresh.Spec.Template = want.Spec.Template
		fresh.Spec.UpdateStrategy = want.Spec.UpdateStrategy
		fresh.Spec.PersistentVolumeClaimRetentionPolicy = want.Spec.PersistentVolumeClaimRetentionPolicy
		if fresh.Annotations == nil {
			fresh.Annotations = map[string]string{}
		}
		fresh.Annotations[annotationTemplateHash] = want.Annotations[annotationTemplateHash]
		if err := r.client.Update(ctx, fresh); err != nil {
			return err
		}
		obs.sts = fresh
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update StatefulSet %s: %w", sts.Name, err)
	}
	r.log.Info("converged StatefulSet", "fleet", f.Name, "namespace", f.Namespace, "replicas", next, "migrated", needsMigration(sts))
	r.announceStep(f, obs, cur, next)
	return nil, nil
}

// statefulSetUpToDate says the StatefulSet already has what the operator
// renders: the same template, replica count, a RollingUpdate strategy with
// partition 0 and Retain claim retention.
func statefulSetUpToDate(got, want *appsv1.StatefulSet) bool {
	return statefulSetTemplateCurrent(got, want) &&
		reflect.DeepEqual(got.Spec.Replicas, want.Spec.Replicas) &&
		!needsMigration(got) &&
		reflect.DeepEqual(got.Spec.PersistentVolumeClaimRetentionPolicy, want.Spec.PersistentVolumeClaimRetentionPolicy)
}

// immutableDiff names a StatefulSet field the operator would render
// differently but may not change.
func immutableDiff(f *celldv1alpha1.CelldFleet, sts *appsv1.StatefulSet) string {
	switch {
	case sts.Spec.ServiceName != peersName(f):
		return "serviceName"
	case sts.Spec.Selector == nil || !reflect.DeepEqual(sts.Spec.Selector.MatchLabels, selectorLabels(f)):
		return "selector"
	case persistent(f) && (len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != dataVolumeName):
		return "volumeClaimTemplates"
	}
	return ""
}

func (r *Reconciler) convergeDeployment(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation, rep *report) (*finding, error) {
	desired := f.Spec.Replicas
	if obs.deploy == nil {
		want := renderDeployment(f, desired)
		if err := controllerutil.SetControllerReference(f, want, r.scheme); err != nil {
			return nil, fmt.Errorf("own Deployment: %w", err)
		}
		if err := r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create Deployment %s: %w", want.Name, err)
		}
		obs.deploy = want
		r.announceStep(f, obs, 0, desired)
		return nil, nil
	}
	d := obs.deploy
	if !metav1.IsControlledBy(d, f) {
		return blocked(celldv1alpha1.ReasonInfrastructureBlocked,
			"Deployment %s exists but is not controlled by this fleet; delete or rename it", d.Name), nil
	}
	cur := obs.applied()
	next := nextStep(cur, desired, func() bool { return true }, func() int32 { return desired },
		deploymentRolledOut(d) && r.contractionAllowed(f, cur, desired, rep))
	want := renderDeployment(f, next)
	if templateCurrent(&d.ObjectMeta, d.Spec.Template, &want.ObjectMeta, want.Spec.Template) && cur == next {
		return nil, nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &appsv1.Deployment{}
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(d), fresh); err != nil {
			return err
		}
		fresh.Spec.Replicas = want.Spec.Replicas
		fresh.Spec.Template = want.Spec.Template
		fresh.Spec.Strategy = want.Spec.Strategy
		if fresh.Annotations == nil {
			fresh.Annotations = map[string]string{}
		}
		fresh.Annotations[annotationTemplateHash] = want.Annotations[annotationTemplateHash]
		if err := r.client.Update(ctx, fresh); err != nil {
			return err
		}
		obs.deploy = fresh
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update Deployment %s: %w", d.Name, err)
	}
	r.announceStep(f, obs, cur, next)
	return nil, nil
}

// contractionAllowed applies the capacity policy's evidence rule to a
// contraction from cur to desired, reporting CapacityUncertain when it holds
// the contraction back.
func (r *Reconciler) contractionAllowed(f *celldv1alpha1.CelldFleet, cur, desired int32, rep *report) bool {
	if desired >= cur || !contractionNeedsEvidence(f) || r.survivorsSuffice(f, desired) {
		return true
	}
	rep.uncertain = capacityUncertain(f, desired)
	return false
}
