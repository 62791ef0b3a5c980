package volume

// A write bound to a resourceVersion the API server no longer holds (an
// update or status write of an object another writer changed since the
// controller read it: a replica host, the CSI controller, the manager's own
// previous reconcile ahead of its cache) is answered 409 Conflict. Nothing
// failed: the next reconcile reads the object again and writes what is
// still needed (docs/volume-controller.md "Status": an unchanged status is
// not written). Returned as an error, controller-runtime logged it as
// ERROR "Reconciler error", many times a minute for one busy volume.
// Reconcile is the one place where a reconcile's errors leave the
// controller, so it is the one place that tells a conflict from a failure.

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Reconcile converges one volume and reports its status. A reconcile that
// stopped only on conflicts is requeued, logged at debug level (V(1)),
// with no error; any other error is returned as it is.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if err == nil || !onlyConflicts(err) {
		return res, err
	}
	logf.FromContext(ctx).V(1).Info("conflicting write; reconciling again", "volume", req.Name, "err", err.Error())
	// A rate-limited requeue, as an error would get, without the error: a
	// cache still behind the write that conflicted would conflict again at
	// once. (RequeueAfter has no backoff; Requeue is the way to get it.)
	//lint:ignore SA1019 the rate-limited requeue is what a conflict needs
	return ctrl.Result{Requeue: true}, nil
}

// onlyConflicts reports whether every error in err's tree is a conflict.
// apierrors.IsConflict alone would find one conflict among other errors
// (errors.Join in reconcile, a wrap around a join) and hide a failure.
func onlyConflicts(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case apierrors.APIStatus:
		return e.Status().Reason == metav1.StatusReasonConflict
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		for _, each := range errs {
			if !onlyConflicts(each) {
				return false
			}
		}
		return len(errs) > 0
	case interface{ Unwrap() error }:
		return onlyConflicts(e.Unwrap())
	}
	return false
}
