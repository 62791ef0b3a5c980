package v1alpha1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func reservationSpec(bucket string) map[string]any {
	return map[string]any{
		"bucket": bucket,
		"fleet": map[string]any{
			"namespace": "celld",
			"name":      "fleet-a",
			"uid":       "0b0d3c1e-5d55-4a39-9b55-0d9d6c3a2f10",
		},
	}
}

// TestCelldStorageReservationValidation proves each reservation rule: the
// name is the bucket (one reservation per bucket), the bucket and fleet
// reference are well formed.
func TestCelldStorageReservationValidation(t *testing.T) {
	cases := []struct {
		name, objName string
		spec          map[string]any
		want          string
	}{
		{"valid reservation accepted", "bucket-one", reservationSpec("bucket-one"), ""},
		{"name other than the bucket rejected", "bucket-two", reservationSpec("bucket-three"), "metadata.name must equal spec.bucket"},
		{"bucket with capitals rejected", "bucket-four", with(func() map[string]any { return reservationSpec("bucket-four") }, set("Bucket_Four", "bucket")), "spec.bucket Bucket_Four must be an S3 bucket name"},
		{"fleet uid missing rejected", "bucket-five", with(func() map[string]any { return reservationSpec("bucket-five") }, unset("fleet", "uid")), "spec.fleet.uid: Required value"},
		{"fleet namespace not a DNS label rejected", "bucket-six", with(func() map[string]any { return reservationSpec("bucket-six") }, set("Celld.NS", "fleet", "namespace")), "spec.fleet.namespace Celld.NS must be a DNS label"},
		{"fleet missing rejected", "bucket-seven", with(func() map[string]any { return reservationSpec("bucket-seven") }, unset("fleet")), "spec.fleet: Required value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			obj := object(reservationGVK, tc.objName, tc.spec)
			err := env.Client.Create(ctx, obj)
			checkOutcome(t, "a CelldStorageReservation where "+tc.name, err, tc.want)
			if err == nil {
				t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
			}
		})
	}
}

// TestCelldStorageReservationSpecImmutable proves a bucket changes owner only
// by deleting its reservation, while metadata stays writable (the operator
// keeps its capacity history in an annotation).
func TestCelldStorageReservationSpecImmutable(t *testing.T) {
	edits := []struct {
		name string
		edit func(*unstructured.Unstructured)
		want string
	}{
		{"fleet uid change rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "another-uid", "spec", "fleet", "uid")
		}, "spec is immutable"},
		{"fleet name change rejected", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "fleet-b", "spec", "fleet", "name")
		}, "spec is immutable"},
		{"annotation change accepted", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"celld.eric.dev/state": `{"capacity":[]}`})
		}, ""},
	}
	for i, tc := range edits {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			name := []string{"immutable-a", "immutable-b", "immutable-c"}[i]
			obj := object(reservationGVK, name, reservationSpec(name))
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatalf("create the reservation to update: %v", err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
			tc.edit(obj)
			checkOutcome(t, "a reservation update where "+tc.name, env.Client.Update(ctx, obj), tc.want)
		})
	}
}

// TestCelldStorageReservationSecondReservationOfBucketRefused proves that the
// API server itself refuses a second reservation of the same bucket.
func TestCelldStorageReservationSecondReservationOfBucketRefused(t *testing.T) {
	ctx := ctxT(t)
	first := object(reservationGVK, "shared-bucket", reservationSpec("shared-bucket"))
	if err := env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, first) })
	second := object(reservationGVK, "shared-bucket", with(func() map[string]any { return reservationSpec("shared-bucket") },
		set("fleet-b", "fleet", "name")))
	checkOutcome(t, "a second reservation of bucket shared-bucket", env.Client.Create(ctx, second), "already exists")
}
