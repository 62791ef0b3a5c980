package fleet

// Convergence of the objects the operator owns outright (PodDisruptionBudget,
// NetworkPolicy): created when absent, rewritten only when the fields the
// operator renders differ, so an unchanged fleet costs no write. An object of
// that name the fleet does not control is InfrastructureBlocked, never
// overwritten.

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// convergeOwned makes the object named by want match it. empty returns a new
// empty object of want's type; matches says an existing object already has
// want's spec; copySpec copies want's spec onto it.
func (r *Reconciler) convergeOwned(ctx context.Context, f *celldv1alpha1.CelldFleet, kind string,
	want client.Object, empty func() client.Object, matches func(got client.Object) bool, copySpec func(dst client.Object),
) (*finding, error) {
	key := client.ObjectKeyFromObject(want)
	var verdict *finding
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := empty()
		err := r.client.Get(ctx, key, got)
		if apierrors.IsNotFound(err) {
			if err := controllerutil.SetControllerReference(f, want, r.scheme); err != nil {
				return fmt.Errorf("own %s %s: %w", kind, key.Name, err)
			}
			if err := r.client.Create(ctx, want); err != nil {
				return fmt.Errorf("create %s %s: %w", kind, key.Name, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s %s: %w", kind, key.Name, err)
		}
		if !metav1.IsControlledBy(got, f) {
			verdict = blocked(celldv1alpha1.ReasonInfrastructureBlocked,
				"%s %s exists but was not created by this fleet; delete or rename it", kind, key.Name)
			return nil
		}
		if matches(got) {
			return nil
		}
		copySpec(got)
		if err := r.client.Update(ctx, got); err != nil {
			return fmt.Errorf("update %s %s: %w", kind, key.Name, err)
		}
		return nil
	})
	return verdict, err
}
