package fleet

// Bucket ownership through CelldStorageReservation (named after the bucket, so
// the API server refuses a second one), and the reservation annotation. The
// annotation (docs/fleet-operator.md, "Capacity policy" and "Migration from
// v0.0.5 and the 0023 controller") holds only capacity-policy state, which
// exists once a fleet sets spec.capacity; it is removed when there is none, and
// fields written by earlier releases (claim identities, strict operations,
// disruption times, applied count, image, restart token, workload identity) are
// dropped on the first write.

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// reservationState is the whole of what the reservation annotation may hold.
type reservationState struct {
	// Capacity is the capacity policy's history: its applied steps.
	Capacity []capacityStep `json:"capacity,omitempty"`
}

// capacityStep is one decision of the capacity policy on one recommendation.
type capacityStep struct {
	ID     string      `json:"id"`
	From   int32       `json:"from"`
	To     int32       `json:"to"`
	At     metav1.Time `json:"at"`
	Shadow bool        `json:"shadow,omitempty"`
}

// normalizedState is the annotation value the reservation should carry, ""
// for none: the capacity history alone, re-encoded so unknown fields drop.
func normalizedState(f *celldv1alpha1.CelldFleet, current string) string {
	if f.Spec.Capacity == nil || current == "" {
		return ""
	}
	var s reservationState
	if err := json.Unmarshal([]byte(current), &s); err != nil || len(s.Capacity) == 0 {
		return ""
	}
	b, _ := json.Marshal(s) // a decoded reservationState always encodes
	return string(b)
}

func (r *Reconciler) reserveBucket(ctx context.Context, f *celldv1alpha1.CelldFleet) (*finding, error) {
	bucket := f.Spec.Storage.Bucket
	var verdict *finding
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		res := &celldv1alpha1.CelldStorageReservation{}
		err := r.client.Get(ctx, client.ObjectKey{Name: bucket}, res)
		if apierrors.IsNotFound(err) {
			res = &celldv1alpha1.CelldStorageReservation{
				ObjectMeta: metav1.ObjectMeta{Name: bucket, Labels: map[string]string{celldv1alpha1.LabelFleet: f.Name}},
				Spec: celldv1alpha1.CelldStorageReservationSpec{Bucket: bucket, Fleet: celldv1alpha1.FleetReference{
					Namespace: f.Namespace, Name: f.Name, UID: string(f.UID),
				}},
			}
			if err := r.client.Create(ctx, res); err != nil {
				return fmt.Errorf("reserve bucket %s: %w", bucket, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read reservation of bucket %s: %w", bucket, err)
		}
		if owner := res.Spec.Fleet; owner.UID != string(f.UID) {
			verdict = blocked(celldv1alpha1.ReasonBucketReserved,
				"bucket %s is reserved by fleet %s/%s (uid %s); give this fleet its own bucket, or delete that reservation once the other fleet is gone",
				bucket, owner.Namespace, owner.Name, owner.UID)
			return nil
		}
		current := res.Annotations[celldv1alpha1.AnnotationReservationState]
		want := normalizedState(f, current)
		if current == want {
			return nil
		}
		if want == "" {
			delete(res.Annotations, celldv1alpha1.AnnotationReservationState)
		} else {
			res.Annotations[celldv1alpha1.AnnotationReservationState] = want
		}
		if err := r.client.Update(ctx, res); err != nil {
			return fmt.Errorf("rewrite reservation state of bucket %s: %w", bucket, err)
		}
		return nil
	})
	return verdict, err
}
