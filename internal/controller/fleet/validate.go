package fleet

// Runtime validation: what the API server's schema cannot check because it
// depends on other objects. A failure reports InvalidConfiguration and leaves
// the workload exactly as it is.

import (
	"context"
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// pinnedImage is the schema's digest rule, checked again because a fleet
// stored before a schema change is not revalidated.
var pinnedImage = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)+@sha256:[a-f0-9]{64}$`)

func invalid(format string, args ...any) *finding {
	return blocked(celldv1alpha1.ReasonInvalidConfiguration, format, args...)
}

func (r *Reconciler) validate(ctx context.Context, f *celldv1alpha1.CelldFleet) (*finding, error) {
	if !pinnedImage.MatchString(f.Spec.RuntimeImage) {
		return invalid("spec.runtimeImage %q is not pinned by digest (registry/path@sha256:<64 hex>)", f.Spec.RuntimeImage), nil
	}
	if sa := f.Spec.ServiceAccountName; sa != "" {
		err := r.client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: sa}, &corev1.ServiceAccount{})
		if apierrors.IsNotFound(err) {
			return invalid("spec.serviceAccountName: ServiceAccount %s/%s does not exist; create it with the bucket credentials", f.Namespace, sa), nil
		}
		if err != nil {
			return nil, fmt.Errorf("read ServiceAccount %s: %w", sa, err)
		}
	}
	if !persistent(f) {
		return nil, nil
	}
	scName := ""
	if f.Spec.Storage.StorageClassName != nil {
		scName = *f.Spec.Storage.StorageClassName
	}
	sc := &storagev1.StorageClass{}
	err := r.client.Get(ctx, client.ObjectKey{Name: scName}, sc)
	if apierrors.IsNotFound(err) {
		return invalid("spec.storage.storageClassName: StorageClass %q does not exist", scName), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read StorageClass %s: %w", scName, err)
	}
	spread := f.Spec.Placement != nil && len(f.Spec.Placement.Zones) > 1
	if spread && (sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer) {
		return invalid("spec.storage.storageClassName: StorageClass %q must use volumeBindingMode WaitForFirstConsumer, or zonal disks are made before their members are placed and the zone spread cannot hold", scName), nil
	}
	return nil, nil
}
