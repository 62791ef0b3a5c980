package volume_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// A write that conflicts because another writer changed
// the volume since it was read is a retry, not a reconcile error (the
// manager logged ERROR "Reconciler error ... the object has been modified"
// 11 times in 2 minutes for one volume): the reconcile returns no error and
// asks to be requeued, and the next one writes the status.
func TestConflictingWriteRequeuesWithoutAnError(t *testing.T) {
	fx := newFixture(t)
	rv := fx.provisioned()
	vrs := fx.replicas(rv.Name)
	fx.hostReport(&vrs[0], storagev1alpha1.RoleCoordinator, true, false, 0)
	fx.hostReport(&vrs[1], storagev1alpha1.RoleFollower, true, false, 0)
	fx.hostReport(&vrs[2], storagev1alpha1.RoleFollower, true, false, 0)

	conflicted := false
	fx.rec.before = func(w write) {
		if conflicted || w.op != "status" || w.name != rv.Name {
			return
		}
		conflicted = true
		// Another writer changes the volume between the controller's read
		// and its status write: the write carries a stale resourceVersion.
		cur := fx.get(rv.Name)
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations["example.com/touched"] = "yes"
		if err := env.Client.Update(fx.ctx, cur); err != nil {
			t.Error(err)
		}
	}
	res, err := fx.reconcile(rv.Name)
	fx.rec.before = nil
	if !conflicted {
		t.Fatal("the reconcile wrote no status: nothing conflicted")
	}
	if err != nil {
		t.Fatalf("a conflicting status write returned error %v (conflict: %v), want none and a requeue", err, apierrors.IsConflict(err))
	}
	//lint:ignore SA1019 the controller asks for a rate-limited requeue (conflict.go)
	if !res.Requeue {
		t.Errorf("result %+v after a conflict, want a requeue", res)
	}
	fx.converge(rv.Name)
	got := &storagev1alpha1.ReplicatedVolume{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Name: rv.Name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Robustness != storagev1alpha1.RobustnessHealthy {
		t.Errorf("robustness %s after the retry, want Healthy", got.Status.Robustness)
	}
}
